package generator

// splitRandom is a port of java.util.SplittableRandom (JDK 8 to 25): the
// same seed gives the same sequence of nextInt, nextInt(bound), nextLong
// and nextDouble values as Java. Only what the generator calls is ported.
// It is not safe for concurrent use.
type splitRandom struct {
	seed uint64
}

// goldenGamma is SplittableRandom's GOLDEN_GAMMA, the gamma of every
// instance built with new SplittableRandom(seed).
const goldenGamma = 0x9e3779b97f4a7c15

func newSplitRandom(seed uint64) splitRandom { return splitRandom{seed: seed} }

// mix64 is SplittableRandom.mix64 (Stafford's variant 13). It is a
// bijection and mix64(0) == 0.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// mix32 is SplittableRandom.mix32.
func mix32(z uint64) int32 {
	z = (z ^ (z >> 33)) * 0x62a9d9ed799705f5
	return int32(((z ^ (z >> 28)) * 0xcb24d0a5c88c35b3) >> 32)
}

// nextInt is Java's nextInt().
func (r *splitRandom) nextInt() int32 {
	r.seed += goldenGamma
	return mix32(r.seed)
}

// nextLong is Java's nextLong().
func (r *splitRandom) nextLong() int64 {
	r.seed += goldenGamma
	return int64(mix64(r.seed))
}

// nextDouble is Java's nextDouble(), uniform in [0, 1).
func (r *splitRandom) nextDouble() float64 {
	return float64(uint64(r.nextLong())>>11) * 0x1.0p-53
}

// nextIntn is Java's nextInt(bound), uniform in [0, bound), with Java's
// rejection loop (which draws again for 32-bit values past the last whole
// multiple of bound). bound must be positive; Java throws otherwise. It
// is small enough to inline, so that constant bounds divide cheaply.
func (r *splitRandom) nextIntn(bound int32) int32 {
	m := bound - 1
	for {
		x := r.nextInt()
		if bound&m == 0 { // a power of two: the low bits, in one draw
			return x & m
		}
		// Java: for (int u = r >>> 1; u + m - (r = u % bound) < 0;
		// u = nextInt() >>> 1); the test relies on int32 wraparound.
		u := int32(uint32(x) >> 1)
		if x = u % bound; u+m-x >= 0 {
			return x
		}
	}
}

// nextLongn is the upstream LongGenerator.nextLong(random, n): a value in
// [0, n) for n > 0, from nextInt(bound) when n fits, otherwise the
// (skewed) |nextLong() % n|.
func (r *splitRandom) nextLongn(n int64) int64 {
	if n < 1<<31-1 { // Integer.MAX_VALUE
		return int64(r.nextIntn(int32(n)))
	}
	v := r.nextLong() % n
	if v < 0 {
		v = -v
	}
	return v
}
