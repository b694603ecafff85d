package typed_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/typed"
)

// twoPass is the population and sample variance of values by their
// definition: the mean first, then the squared differences from it.
func twoPass(values []float64) (pop, samp float64) {
	if len(values) == 0 {
		return math.NaN(), math.NaN()
	}
	var sum float64
	for _, v := range values {
		sum += v
	}
	mean := sum / float64(len(values))
	var m2 float64
	for _, v := range values {
		m2 += (v - mean) * (v - mean)
	}
	samp = math.NaN()
	if len(values) > 1 {
		samp = m2 / float64(len(values)-1)
	}
	return m2 / float64(len(values)), samp
}

// nearly reports whether got is want within a relative tol, NaN only
// for NaN.
func nearly(got, want, tol float64) bool {
	if math.IsNaN(want) || math.IsNaN(got) {
		return math.IsNaN(want) && math.IsNaN(got)
	}
	return math.Abs(got-want) <= tol*math.Max(math.Abs(want), 1e-12)
}

// TestVariances: VarPop, VarSamp, StddevPop and StddevSamp of no value,
// one, two, and thousands (small, and far from zero, where a sum of
// squares loses every digit), folded into one accumulator or merged from
// chunks in a chain or a tree, are what the two-pass definition gives
// (within a relative 1e-9; 1e-6 for values a billion from zero, whose
// last bits are 1e-7 apart, where a sum of squares loses every
// digit): NaN for none, and the samples' for one.
func TestVariances(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	sets := map[string][]float64{"none": nil, "one": {3.5}, "two": {1, 4}}
	for _, n := range []int{1000, 50_000} {
		small, far := make([]float64, n), make([]float64, n)
		for i := range n {
			small[i] = r.NormFloat64() * 3
			far[i] = 1e9 + r.Float64()
		}
		sets[fmt.Sprint(n, " small")], sets[fmt.Sprint(n, " far from zero")] = small, far
	}
	sqrt := func(v float64) float64 { return math.Sqrt(v) }
	same := func(v float64) float64 { return v }
	for name, values := range sets {
		pop, samp := twoPass(values)
		tol := 1e-9
		if strings.Contains(name, "far") {
			tol = 1e-6
		}
		for _, tc := range []struct {
			name string
			agg  typed.Aggregator[fixtures.Click, typed.MomentsAcc, float64]
			want float64
		}{
			{"VarPop", typed.VarPop(pageValue), same(pop)},
			{"VarSamp", typed.VarSamp(pageValue), same(samp)},
			{"StddevPop", typed.StddevPop(pageValue), sqrt(pop)},
			{"StddevSamp", typed.StddevSamp(pageValue), sqrt(samp)},
		} {
			for _, how := range []string{"one", "chained", "tree"} {
				if got := tc.agg.Result(summarize(tc.agg, values, how, 5)); !nearly(got, tc.want, tol) {
					t.Errorf("%s of %s values, %s: %v, want %v", tc.name, name, how, got, tc.want)
				}
			}
		}
	}
}

// TestStddevWindows: the sample standard deviation of each user's values
// in each 1-minute window, under batch splits and a restart, is the
// two-pass one of the window's values (NaN for a window of one row).
func TestStddevWindows(t *testing.T) {
	in, byWindow := valuedClicks()
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, typed.StddevSamp(pageValue), func(w typed.Window, user string, v float64) windowCount {
			return windowCount{Window: w, User: user, Value: v}
		})
	}
	var ones int
	for _, values := range byWindow {
		if len(values) == 1 {
			ones++
		}
	}
	if ones == 0 {
		t.Fatal("no window of one row: the test does not see NaN")
	}
	for _, perBatch := range []int{0, 13, 70} {
		got := latestWindows(t, in, perBatch, build)
		if len(got) != len(byWindow) {
			t.Fatalf("%d per batch: %d windows, want %d", perBatch, len(got), len(byWindow))
		}
		for id, values := range byWindow {
			_, samp := twoPass(values)
			if want := math.Sqrt(samp); !nearly(got[id], want, 1e-9) {
				t.Fatalf("%d per batch: %s: %v, want %v", perBatch, id, got[id], want)
			}
		}
	}
}

// TestStddevSampOfOneRowToJSON: a user of one row has no sample standard
// deviation (Spark's NULL, NaN here), which a JSON sink refuses, as
// encoding/json does, failing the query; written through NullIfNaN into
// a *float64 field tagged omitempty, the member is left out, as Spark's
// JSON writer leaves out a NULL, and the other users' deviations are the
// loop's.
func TestStddevSampOfOneRowToJSON(t *testing.T) {
	in := clicks(40, 3)
	in = append(in, fixtures.Click{User: "alone", Time: at(100), Page: "p"})
	value := func(c *fixtures.Click) float64 { return float64(len(c.Page) + c.Time.Second()%7) }
	byUser := map[string][]float64{}
	for i := range in {
		byUser[in[i].User] = append(byUser[in[i].User], value(&in[i]))
	}
	deviations := func(f func(float64) *float64) typed.Stream[fixtures.UserDeviation] {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		m.Add(in...)
		return typed.AggregateByKey(typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }), typed.StddevSamp(value),
			func(u string, sd float64) fixtures.UserDeviation {
				return fixtures.UserDeviation{User: u, Deviation: f(sd)}
			})
	}
	err := runToEnd(t, typed.WriteTo(deviations(func(sd float64) *float64 { return &sd }), typed.FilesSink[fixtures.UserDeviation](t.TempDir())).OutputMode(typed.Complete), newCheckpoint().opts()...)
	if err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Fatalf("NaN written as JSON: %v, want the sink's refusal", err)
	}
	dir := t.TempDir()
	if err := runToEnd(t, typed.WriteTo(deviations(typed.NullIfNaN), typed.FilesSink[fixtures.UserDeviation](dir)).OutputMode(typed.Complete), newCheckpoint().opts()...); err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{}
	got := map[string]*float64{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			var d fixtures.UserDeviation
			if err := d.UnmarshalJSON([]byte(line)); err != nil {
				t.Fatal(err)
			}
			lines[d.User], got[d.User] = strings.TrimSpace(line), d.Deviation
		}
	}
	if len(got) != len(byUser) {
		t.Fatalf("%d users written, want %d", len(got), len(byUser))
	}
	for user, values := range byUser {
		if len(values) == 1 {
			if want := fmt.Sprintf(`{"user":%q}`, user); lines[user] != want {
				t.Errorf("%s, of one row: %s, want %s", user, lines[user], want)
			}
			continue
		}
		_, samp := twoPass(values)
		if got[user] == nil || !nearly(*got[user], math.Sqrt(samp), 1e-9) {
			t.Errorf("%s (%d rows): %s, want a deviation of %v", user, len(values), lines[user], math.Sqrt(samp))
		}
	}
}
