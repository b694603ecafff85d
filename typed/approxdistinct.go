package typed

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// ApproxDistinctAcc is ApproxCountDistinct's accumulator: a HyperLogLog
// sketch of 2^P registers, each one more than the most leading zeros
// among the hashes of its values (past the P bits that pick the
// register); no registers until a value comes.
//
//streamgen:record
type ApproxDistinctAcc struct {
	P         int    `json:"p"`
	Registers []byte `json:"registers"`
}

// ApproxCountDistinct estimates how many distinct values value takes over
// the rows, as Spark's approx_count_distinct(column, rsd): a HyperLogLog
// sketch of 2^p one-byte registers, p = ⌈2·log2(1.106/rsd)⌉ as Spark
// picks it (rsd 0.05: 512 registers), so that the estimate's relative
// standard deviation is at most rsd. rsd must be from 0.00216 to 0.391 (p
// from 18 to 4): ApproxCountDistinct panics otherwise, as Spark refuses
// an rsd over 0.39 ("HLL++ requires at least 4 bits for addressing"),
// and as it would not hold registers of 2^19 bytes a key. The estimate
// is Ertl's improved estimator, unbiased from no value to billions;
// values hash with xxHash64 (seed 0), so sketches of any batch, process
// or restart merge (a window's across batches, sessions that merge).
// Spark hashes with seed 42 and estimates with HLL++'s bias tables:
// the estimates are as close to the count, but not the same numbers. Accumulators of another rsd (a restart with
// another) merge at the lower precision of the two. Add and Merge change
// the registers of their first argument, never those of Merge's second.
// A stored accumulator that is no sketch (registers of another number
// than its precision makes, or a register past its largest value) fails
// the query, naming what is wrong.
func ApproxCountDistinct[In any](value func(*In) string, rsd float64) Aggregator[In, ApproxDistinctAcc, int64] {
	if !(rsd > 0) || math.IsInf(rsd, 0) {
		panic(fmt.Sprintf("streamgen: ApproxCountDistinct: rsd %v must be a positive number", rsd))
	}
	p := int(math.Ceil(2 * math.Log2(1.106/rsd)))
	switch {
	case p < 4:
		panic(fmt.Sprintf("streamgen: ApproxCountDistinct: rsd %v needs %d bits for addressing registers, and HLL++ needs at least 4: use a lower error, at most 39%%", rsd, p))
	case p > 18:
		panic(fmt.Sprintf("streamgen: ApproxCountDistinct: rsd %v needs %d bits for addressing registers (2^%d registers), more than the 18 a sketch may have: use a higher error, at least 0.00216", rsd, p, p))
	}
	return approxDistinctAgg[In]{value: value, p: p}
}

type approxDistinctAgg[In any] struct {
	value func(*In) string
	p     int
}

func (a approxDistinctAgg[In]) Zero() ApproxDistinctAcc { return ApproxDistinctAcc{P: a.p} }

func (a approxDistinctAgg[In]) Add(acc ApproxDistinctAcc, r *In) ApproxDistinctAcc {
	if acc.Registers == nil {
		if acc.P < 4 || acc.P > 18 {
			acc.P = a.p
		}
		acc.Registers = make([]byte, 1<<acc.P)
	} else if acc.P < 4 || acc.P > 18 || len(acc.Registers) != 1<<acc.P {
		mustBeSketch(acc) // the registers' values are checked where read
	}
	h := xxhash.Sum64String(a.value(r))
	// The register is the hash's first P bits; its value, the leading
	// zeros of the rest plus one (a guard bit past them caps it at 65-P).
	i := h >> (64 - acc.P)
	if v := byte(bits.LeadingZeros64(h<<acc.P|1<<(acc.P-1)) + 1); v > acc.Registers[i] {
		acc.Registers[i] = v
	}
	return acc
}

func (approxDistinctAgg[In]) Merge(x, y ApproxDistinctAcc) ApproxDistinctAcc {
	switch {
	case y.Registers == nil:
		return x
	case x.Registers == nil:
		// A copy: y's registers stay y's (a caller may merge a stored
		// accumulator into several).
		mustBeSketch(y)
		return ApproxDistinctAcc{P: y.P, Registers: slices.Clone(y.Registers)}
	}
	mustBeSketch(x)
	mustBeSketch(y)
	switch {
	case x.P > y.P:
		x = ApproxDistinctAcc{P: y.P, Registers: foldRegisters(x.Registers, x.P, y.P)}
	case y.P > x.P:
		y = ApproxDistinctAcc{P: x.P, Registers: foldRegisters(y.Registers, y.P, x.P)}
	}
	for i, v := range y.Registers {
		x.Registers[i] = max(x.Registers[i], v)
	}
	return x
}

func (approxDistinctAgg[In]) Result(acc ApproxDistinctAcc) int64 {
	if acc.Registers == nil {
		return 0
	}
	mustBeSketch(acc)
	return int64(math.Round(estimateDistinct(acc.Registers, acc.P)))
}

// mustBeSketch panics, with what is wrong (the query fails with it),
// unless acc holds the registers of its precision, each at most 65-P.
func mustBeSketch(acc ApproxDistinctAcc) {
	if acc.P < 4 || acc.P > 18 || len(acc.Registers) != 1<<acc.P {
		panic(fmt.Errorf("ApproxCountDistinct: an accumulator of precision %d holds %d registers: not a sketch this aggregator makes (precision 4 to 18, 2^precision registers)", acc.P, len(acc.Registers)))
	}
	top := byte(65 - acc.P)
	for i, v := range acc.Registers {
		if v > top {
			panic(fmt.Errorf("ApproxCountDistinct: register %d of an accumulator of precision %d holds %d, past its largest value, %d: not a sketch this aggregator makes", i, acc.P, v, top))
		}
	}
}

// foldRegisters returns the registers of precision p that registers r of
// precision from > p make, as if the values had been hashed into 2^p:
// the index bits that p drops begin the rest of the hash.
func foldRegisters(r []byte, from, p int) []byte {
	out := make([]byte, 1<<p)
	shift := from - p
	for i, v := range r {
		if v == 0 {
			continue
		}
		var w byte
		if low := uint64(i) & (1<<shift - 1); low != 0 {
			w = byte(bits.LeadingZeros64(low<<(64-shift)) + 1)
		} else {
			w = byte(shift) + v
		}
		j := i >> shift
		out[j] = max(out[j], w)
	}
	return out
}

// estimateDistinct is Ertl's improved estimator ("New cardinality
// estimation algorithms for HyperLogLog sketches", 2017, algorithm 6)
// over registers r of precision p, whose values run from 0 to 65-p.
func estimateDistinct(r []byte, p int) float64 {
	m, q := float64(len(r)), 64-p
	var c [66]float64 // how many registers hold each value
	for _, v := range r {
		c[v]++
	}
	z := m * hllTau(1-c[q+1]/m)
	for k := q; k >= 1; k-- {
		z = 0.5 * (z + c[k])
	}
	z += m * hllSigma(c[0]/m)
	return m * m / (2 * math.Ln2 * z)
}

func hllSigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		prev := z
		z += x * y
		y += y
		if z == prev {
			return z
		}
	}
}

func hllTau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		prev := z
		y *= 0.5
		z -= (1 - x) * (1 - x) * y
		if z == prev {
			return z / 3
		}
	}
}
