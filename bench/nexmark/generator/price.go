package generator

import (
	"math"
	"math/big"
	"sync"
)

// nextPrice is PriceGenerator.nextPrice: Math.round(Math.pow(10.0,
// nextDouble()*6.0) * 100.0), log-uniform in [100, 100,000,000] cents.
func (r *splitRandom) nextPrice() int64 {
	return priceOf(r.nextDouble())
}

// priceOf is the price for the random double d.
//
// Java's Math.pow is not reproducible bit for bit in Go: HotSpot's is
// correctly rounded in all but a few cases in ten thousand, while Go's
// math.Pow(10, y) differs from it in the last bit for 46% of the y here
// (and is slow). The last bit changes the price only when 100*10^y lies
// within an ulp or so of a half-integer. So priceOf computes 10^y with
// pow10, within an ulp (it differs from Java's for 0.4% of the y), and
// only when the result is within 45 ulps (1e-14 relative) of a
// half-integer does it compute the correctly rounded power with 256-bit
// arithmetic and round that, as Java does. Checked against 20 million
// prices of the JVM: all equal, 6 of them by the slow path.
func priceOf(d float64) int64 {
	y := float64(d * 6.0)
	v := float64(pow10(y) * 100.0)
	if math.Abs(float64(v-math.Floor(v))-0.5) <= float64(v*1e-14) {
		v = float64(pow10Exact(y) * 100.0)
	}
	return javaRound(v)
}

// pow10 returns 10^y for y in [0, 6], within an ulp (correctly rounded
// in all but about one case in 200). With y = k + j/256 + f, k and j
// integers and f in [0, 1/256), all three exact, 10^y = 10^k *
// 10^(j/256) * e^(f ln 10): 10^k is exact, 10^(j/256) comes from a table
// of double-doubles and e^x - 1 from its Taylor series to x^6 (|x| <
// 0.009, so the error is below 1e-18), and the product is summed in
// double-double arithmetic with one final rounding.
func pow10(y float64) float64 {
	k := math.Floor(y)
	rem := y - k                // exact: k <= y < 2k, or k = 0
	j := math.Floor(rem * 256)  // rem*256 is exact
	f := float64(rem - j/256)   // exact, likewise
	t := &pow10Table()[int(j)]  // 10^(j/256) = t.hi + t.lo
	p := powersOf10[int(k)]     // exact
	x := float64(f * math.Ln10) // e^x - 1 = x + x^2/2 + ...
	q := x * (1 + x*(1.0/2+x*(1.0/6+x*(1.0/24+x*(1.0/120+x*(1.0/720))))))
	m := math.FMA(t.hi, q, t.lo) // 10^(j/256 + f) = t.hi + m, to 1e-18
	hi := float64(t.hi * p)      // exact product: hi + lo
	lo := math.FMA(t.hi, p, -hi)
	return hi + math.FMA(m, p, lo)
}

var powersOf10 = [...]float64{1, 10, 100, 1e3, 1e4, 1e5, 1e6}

type doubleDouble struct{ hi, lo float64 }

var (
	pow10TableOnce sync.Once
	pow10Tab       *[256]doubleDouble
)

// pow10Table returns the table of 10^(j/256), j in [0, 256), as
// double-doubles, computing it on first use (in a few milliseconds).
func pow10Table() *[256]doubleDouble {
	pow10TableOnce.Do(func() {
		t := new([256]doubleDouble)
		for j := range t {
			v := pow10Big(float64(j) / 256)
			t[j].hi, _ = v.Float64()
			t[j].lo, _ = v.Sub(v, newBig(t[j].hi)).Float64()
		}
		pow10Tab = t
	})
	return pow10Tab
}

// javaRound is Java's Math.round(double) for finite values within the
// long range: the closest long, ties towards positive infinity.
func javaRound(x float64) int64 {
	f := math.Floor(x)
	if float64(x-f) >= 0.5 {
		f++
	}
	return int64(f)
}

const bigPrec = 256

var (
	ln10Once sync.Once
	ln10Big  *big.Float
)

func newBig(x float64) *big.Float { return new(big.Float).SetPrec(bigPrec).SetFloat64(x) }

// pow10Exact returns 10^y correctly rounded (to nearest, ties to even),
// for y in [0, 6]. It is slow (tens of microseconds) and used only where
// the last bit of the power matters.
func pow10Exact(y float64) float64 {
	f, _ := pow10Big(y).Float64()
	return f
}

// pow10Big returns 10^y to 256 bits.
func pow10Big(y float64) *big.Float {
	ln10Once.Do(func() {
		// ln 10 = 3 ln 2 + ln 1.25
		l := lnBig(newBig(2))
		l.Mul(l, newBig(3))
		ln10Big = l.Add(l, lnBig(newBig(1.25)))
	})
	z := newBig(y)
	z.Mul(z, ln10Big)
	return expBig(z)
}

// lnBig is ln x = 2 atanh((x-1)/(x+1)) for x near 1, by its series.
func lnBig(x *big.Float) *big.Float {
	one := newBig(1)
	t := new(big.Float).SetPrec(bigPrec).Sub(x, one)
	t.Quo(t, new(big.Float).SetPrec(bigPrec).Add(x, one))
	t2 := new(big.Float).SetPrec(bigPrec).Mul(t, t)
	sum := new(big.Float).SetPrec(bigPrec).Set(t)
	term := new(big.Float).SetPrec(bigPrec).Set(t)
	q := new(big.Float).SetPrec(bigPrec)
	for k := 3; ; k += 2 {
		term.Mul(term, t2)
		q.Quo(term, newBig(float64(k)))
		sum.Add(sum, q)
		if q.Sign() == 0 || q.MantExp(nil) < sum.MantExp(nil)-bigPrec-8 {
			break
		}
	}
	return sum.Mul(sum, newBig(2))
}

// expBig is e^z for z in [0, 16), by the Taylor series of z/2^20 squared
// 20 times.
func expBig(z *big.Float) *big.Float {
	const k = 20
	x := new(big.Float).SetPrec(bigPrec).SetMantExp(z, -k)
	sum := newBig(1)
	term := newBig(1)
	for i := 1; ; i++ {
		term.Mul(term, x)
		term.Quo(term, newBig(float64(i)))
		sum.Add(sum, term)
		if term.Sign() == 0 || term.MantExp(nil) < sum.MantExp(nil)-bigPrec-8 {
			break
		}
	}
	for range k {
		sum.Mul(sum, sum)
	}
	return sum
}
