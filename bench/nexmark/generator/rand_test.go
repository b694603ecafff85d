package generator

import (
	"math"
	"testing"
)

// TestSplitRandomVectors checks the port against values printed by Java's
// new SplittableRandom(42), consumed in this order by one instance.
func TestSplitRandomVectors(t *testing.T) {
	r := newSplitRandom(42)
	for i, want := range []int32{-491277234, 909395113, -1877322334} {
		if got := r.nextInt(); got != want {
			t.Errorf("nextInt #%d = %d, want %d", i, got, want)
		}
	}
	for i, want := range []int64{6349198060258255764, 701532786141963250} {
		if got := r.nextLong(); got != want {
			t.Errorf("nextLong #%d = %d, want %d", i, got, want)
		}
	}
	for i, want := range []float64{0.8682280765465323, 0.21840519371218436} {
		if got := r.nextDouble(); got != want {
			t.Errorf("nextDouble #%d = %v, want %v", i, got, want)
		}
	}
	for i, want := range []int32{2, 3, 4, 11, 1} {
		if got := r.nextIntn(13); got != want {
			t.Errorf("nextInt(13) #%d = %d, want %d", i, got, want)
		}
	}
	for i, want := range []int32{9971, 3846, 8128} {
		if got := r.nextIntn(10000); got != want {
			t.Errorf("nextInt(10000) #%d = %d, want %d", i, got, want)
		}
	}
}

// TestSplitRandomRejection checks nextInt(bound) for bounds whose
// rejection loop draws again often, against Java's new
// SplittableRandom(42): 8 × nextInt(2^30+1), then 8 × nextInt(2e9).
func TestSplitRandomRejection(t *testing.T) {
	r := newSplitRandom(42)
	for i, want := range []int32{454697556, 95458856, 517437945, 823239971, 177078128, 1065343553, 250425588, 415021941} {
		if got := r.nextIntn(1<<30 + 1); got != want {
			t.Errorf("nextInt(2^30+1) #%d = %d, want %d", i, got, want)
		}
	}
	for i, want := range []int32{525265886, 389759421, 1181307992, 1205213127, 230630234, 453050122, 402454153, 806976430} {
		if got := r.nextIntn(2_000_000_000); got != want {
			t.Errorf("nextInt(2e9) #%d = %d, want %d", i, got, want)
		}
	}
}

func TestMix64(t *testing.T) {
	if mix64(0) != 0 {
		t.Errorf("mix64(0) = %#x", mix64(0))
	}
	if SplitSeed(42, 0) != 42 {
		t.Errorf("SplitSeed(42, 0) = %d", SplitSeed(42, 0))
	}
	// The seeds the Java harness was run with (testdata/refgen/gen.sh).
	if got := int64(SplitSeed(42, 7)); got != 1346066267577507646 {
		t.Errorf("SplitSeed(42, 7) = %d", got)
	}
}

// TestPrice checks prices against Java's Math.round(Math.pow(10.0, d*6.0)
// * 100.0) for doubles whose 100*10^(6d) is close to a half-integer; the
// first two take priceOf's exact path.
func TestPrice(t *testing.T) {
	for _, c := range []struct {
		d    float64
		want int64
	}{
		{0.9952462609238732, 93643484},
		{0.8869364905848323, 20970991},
		{0.9001767289957118, 25180270},
		{0.9385001690956256, 42756389},
		{0.9774597226715322, 73241687},
		{0, 100},
		{0.5, 100_000},
	} {
		if got := priceOf(c.d); got != c.want {
			t.Errorf("priceOf(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// TestPow10 checks pow10Exact on exact powers, and pow10 against it:
// priceOf relies on pow10 being within a few ulps of 10^y.
func TestPow10(t *testing.T) {
	for k := range 7 {
		if got, want := pow10Exact(float64(k)), math.Pow10(k); got != want {
			t.Errorf("pow10Exact(%d) = %v, want %v", k, got, want)
		}
	}
	r := newSplitRandom(1)
	worst := 0.0
	misrounded := 0
	for range 2000 {
		y := r.nextDouble() * 6
		exact := pow10Exact(y)
		ulp := math.Nextafter(exact, math.Inf(1)) - exact
		if ulps := math.Abs(pow10(y)-exact) / ulp; ulps > worst {
			worst = ulps
		}
		if pow10(y) != exact {
			misrounded++
		}
		// Java's Math.pow is within an ulp, and math.Pow within a few.
		if ulps := math.Abs(math.Pow(10, y)-exact) / ulp; ulps > 4 {
			t.Errorf("math.Pow(10, %v) is %v ulps from %v", y, ulps, exact)
		}
	}
	if worst > 1 || misrounded > 20 {
		t.Errorf("pow10 is up to %v ulps from the correctly rounded power, and differs from it %d times in 2000", worst, misrounded)
	}
	t.Logf("pow10: up to %v ulps from the correctly rounded power, %d times in 2000", worst, misrounded)
}

func TestJavaRound(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want int64
	}{{0.5, 1}, {1.5, 2}, {2.5, 3}, {-0.5, 0}, {-1.5, -1}, {0.49999999999999994, 0}, {13.6, 14}, {13.4, 13}} {
		if got := javaRound(c.x); got != c.want {
			t.Errorf("javaRound(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

// TestNextLongn checks upstream's LongGenerator.nextLong for a bound past
// Integer.MAX_VALUE, against Java's Math.abs(nextLong() % 1e10) from new
// SplittableRandom(42).
func TestNextLongn(t *testing.T) {
	r := newSplitRandom(42)
	for i, want := range []int64{954276203, 2126892291, 8462763858, 258255764, 6141963250, 8046562554} {
		if got := r.nextLongn(10_000_000_000); got != want {
			t.Errorf("nextLong(1e10) #%d = %d, want %d", i, got, want)
		}
	}
	r = newSplitRandom(42)
	if got := r.nextLongn(13); got != 8 {
		// nextInt(13) of a fresh SplittableRandom(42): (-491277234 >>> 1) % 13
		t.Errorf("nextLong(13) = %d, want 8", got)
	}
}
