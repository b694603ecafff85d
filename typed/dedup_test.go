package typed_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// withDuplicates makes n clicks in increasing event time, a third of them
// repeated at once (same user and time, another page).
func withDuplicates(n int) []fixtures.Click {
	base := orderedClicks(n)
	var out []fixtures.Click
	for i, c := range base {
		out = append(out, c)
		if i%3 == 0 && i+2 < len(base) {
			dup := c
			dup.Page = "dup"
			out = append(out, dup)
		}
	}
	return out
}

// TestDropDuplicates compares with a plain loop that keeps the first row
// of each key (user and event time), without a watermark and with one,
// under several batch sizes and a restart: with the watermark too every
// key stays in state (Spark's dropDuplicates whose columns do not hold
// the watermark's column: the key function's result is opaque).
func TestDropDuplicates(t *testing.T) {
	in := withDuplicates(300)
	type key struct {
		user string
		at   time.Time
	}
	var want []fixtures.Click
	seen := map[key]bool{}
	for _, c := range in {
		if k := (key{c.User, c.Time}); !seen[k] {
			seen[k] = true
			want = append(want, c)
		}
	}
	for _, perBatch := range []int{0, 11, 50} {
		for _, watermarked := range []bool{false, true} {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
			s := typed.FromMemory(m)
			if watermarked {
				s = typed.WithWatermark(s, func(c *fixtures.Click) time.Time { return c.Time }, 5*time.Second)
			}
			sink := newSink[fixtures.Click]()
			w := typed.WriteTo(typed.DropDuplicates(s, func(c *fixtures.Click) string { return c.User + "@" + c.Time.String() }), sink)
			ck := newCheckpoint()
			m.Add(in[:100]...)
			if err := runToEnd(t, w, ck.opts()...); err != nil {
				t.Fatal(err)
			}
			m.Add(in[100:]...)
			q, _, _ := runAvailableNow(t, w, ck, sink)
			got := sink.rows()
			// Within a batch rows come out by key, in order of first
			// arrival; so compare as sets, and check each is the first.
			sortClicks := func(c []fixtures.Click) []string {
				var out []string
				for _, x := range c {
					out = append(out, fmt.Sprint(x.User, x.Time.Unix(), x.Page))
				}
				slices.Sort(out)
				return out
			}
			if !slices.Equal(sortClicks(got), sortClicks(want)) {
				t.Fatalf("%d per batch, watermark %v: %d rows, want %d (the first of each key)", perBatch, watermarked, len(got), len(want))
			}
			if p, _ := q.LastProgress(); p.StateOperators[0].NumRowsTotal != int64(len(want)) {
				t.Fatalf("%d keys in state at the end, want every key (%d)", p.StateOperators[0].NumRowsTotal, len(want))
			}
		}
	}
}

// TestDropDuplicatesWithinWatermark: a duplicate within the watermark's
// delay of its key's first row is dropped; after the watermark has passed
// the first row's time plus the delay, the key is forgotten and its next
// row kept.
func TestDropDuplicatesWithinWatermark(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1) // one row per batch
	m.Add(
		fixtures.Click{User: "a", Time: at(0), Page: "first"},
		fixtures.Click{User: "a", Time: at(8), Page: "within"}, // dropped: within 10 s of the first
		fixtures.Click{User: "b", Time: at(25), Page: "b"},     // makes the watermark 15
		// Runs with the watermark 15, which forgets a's key (kept until
		// 10) after the batch's rows: as in Spark, a copy, though more
		// than 10 s after the first (Spark drops the copies within the
		// delay, and may drop or keep the others).
		fixtures.Click{User: "a", Time: at(16), Page: "after"},
		fixtures.Click{User: "a", Time: at(20), Page: "again"}, // a's key forgotten: kept
		fixtures.Click{User: "a", Time: at(12), Page: "late"},  // at or before the watermark the batch before ran with (15): late
	)
	got := pagesKeptWithinWatermark(t, m)
	if want := []string{"first", "b", "again"}; !slices.Equal(got, want) {
		t.Fatalf("kept %q, want %q", got, want)
	}
}

// pagesKeptWithinWatermark runs DropDuplicatesWithinWatermark by user,
// with a watermark 10 s behind, over m, and returns the pages it kept.
func pagesKeptWithinWatermark(t *testing.T, m *typed.MemoryStream[fixtures.Click]) []string {
	t.Helper()
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 10*time.Second)
	sink := newSink[fixtures.Click]()
	w := typed.WriteTo(typed.DropDuplicatesWithinWatermark(s, func(c *fixtures.Click) string { return c.User }), sink)
	if err := runToEnd(t, w, newCheckpoint().opts()...); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range sink.rows() {
		got = append(got, c.Page)
	}
	return got
}

// TestDropDuplicatesWithinWatermarkBetweenWatermarks: a copy that is not
// late (after the watermark the batch before ran with) but whose first
// row's key this batch's watermark forgets is still dropped: the key is
// forgotten after the batch's rows, as in Spark.
func TestDropDuplicatesWithinWatermarkBetweenWatermarks(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1) // one row per batch
	m.Add(
		fixtures.Click{User: "k", Time: at(100), Page: "first"}, // remembered until 110
		fixtures.Click{User: "x", Time: at(125), Page: "x"},     // runs with the watermark 90, makes 115
		fixtures.Click{User: "k", Time: at(105), Page: "copy"},  // runs with 115, late by 90: a copy
	)
	got := pagesKeptWithinWatermark(t, m)
	if want := []string{"first", "x"}; !slices.Equal(got, want) {
		t.Fatalf("kept %q, want %q", got, want)
	}
}

// repeatedReadings makes n clicks of five users in roughly increasing
// event time (whole seconds, a few seconds out of order), and a copy
// (same user and time, page "copy") of one in four, 1 to 40 clicks after
// it: some copies come within the watermark's delay of their original,
// others after the watermark has passed it, and some clicks come late.
func repeatedReadings(n int, seed uint64) []fixtures.Click {
	r := rand.New(rand.NewPCG(seed, seed))
	users := []string{"a", "b", "c", "d", "e"}
	later := map[int][]fixtures.Click{}
	var out []fixtures.Click
	for i := range n {
		c := fixtures.Click{User: users[r.IntN(len(users))], Time: at(2*i + r.IntN(7) - 3), Page: fmt.Sprint("p", i)}
		out = append(out, c)
		out = append(out, later[i]...)
		delete(later, i)
		if r.IntN(4) == 0 {
			dup := c
			dup.Page = "copy"
			j := i + 1 + r.IntN(40)
			later[j] = append(later[j], dup)
		}
	}
	for j := n; j < n+41; j++ {
		out = append(out, later[j]...)
	}
	return out
}

// dedupModel is a plain loop with Spark's rules for dropDuplicates with
// the watermark's column in the key, over the batches of each start of
// the query: a batch's watermark is the latest event time of the batches
// before less delay; a row at or before the watermark of the batch
// before is late; a row whose user and time came before (and were not
// forgotten) is a copy; a key is forgotten once a batch's watermark
// reaches its time. A start ends with a batch without data when the
// watermark has moved since its last batch. It returns the rows kept,
// the late rows' number, and the keys remembered at the end.
func dedupModel(starts [][][]fixtures.Click, delay time.Duration) (kept []fixtures.Click, late int64, state map[string]time.Time) {
	type key struct {
		user string
		at   time.Time
	}
	seen := map[key]bool{}
	var latest, wm, lateWM time.Time
	next := func() time.Time {
		if latest.IsZero() {
			return time.Time{}
		}
		return latest.Add(-delay)
	}
	run := func(b []fixtures.Click) {
		lateWM, wm = wm, next()
		for _, c := range b {
			switch k := (key{c.User, c.Time}); {
			case !lateWM.IsZero() && !c.Time.After(lateWM):
				late++
			case !seen[k]:
				seen[k] = true
				kept = append(kept, c)
			}
		}
		for k := range seen {
			if !wm.IsZero() && !k.at.After(wm) {
				delete(seen, k)
			}
		}
		for _, c := range b {
			if c.Time.After(latest) {
				latest = c.Time
			}
		}
	}
	for _, batches := range starts {
		for _, b := range batches {
			run(b)
		}
		if next().After(wm) {
			run(nil)
		}
	}
	state = map[string]time.Time{}
	for k := range seen {
		state[fmt.Sprint(k.user, "@", k.at.Unix())] = k.at
	}
	return kept, late, state
}

// TestDropDuplicatesWithEventTime compares DropDuplicatesWithEventTime,
// keyed by the user (the event time is the rest of the key), with the
// plain loop of Spark's rules, under several batch sizes and a restart on
// the checkpoint: the same rows kept (the first of each user and time),
// the same late rows, and, read back from the checkpoint, the same keys
// remembered, each with its time.
func TestDropDuplicatesWithEventTime(t *testing.T) {
	const delay = 10 * time.Second
	in := repeatedReadings(240, 7)
	split := func(rows []fixtures.Click, per int) [][]fixtures.Click {
		if per == 0 {
			return [][]fixtures.Click{rows}
		}
		var out [][]fixtures.Click
		for len(rows) > 0 {
			n := min(per, len(rows))
			out, rows = append(out, rows[:n]), rows[n:]
		}
		return out
	}
	text := func(rows []fixtures.Click) []string {
		var out []string
		for _, c := range rows {
			out = append(out, fmt.Sprint(c.User, "@", c.Time.Unix(), " ", c.Page))
		}
		slices.Sort(out)
		return out
	}
	const restart = 100 // the query stops after this many rows and starts again
	for _, perBatch := range []int{0, 1, 7, 50} {
		t.Run(fmt.Sprint(perBatch, " per batch"), func(t *testing.T) {
			wantRows, wantLate, wantState := dedupModel([][][]fixtures.Click{split(in[:restart], perBatch), split(in[restart:], perBatch)}, delay)
			if wantLate == 0 || len(wantRows) == len(in)-int(wantLate) {
				t.Fatalf("the input has %d late rows and %d copies: it tests nothing", wantLate, len(in)-int(wantLate)-len(wantRows))
			}
			m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
			s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, delay)
			sink := newSink[fixtures.Click]()
			w := typed.WriteTo(typed.DropDuplicatesWithEventTime(s, func(c *fixtures.Click) string { return c.User }), sink)
			ck := newCheckpoint()
			var late, stateRows int64
			count := listener{progress: func(p runtime.QueryProgress) {
				late += p.StateOperators[0].NumRowsDroppedByWatermark
				stateRows = p.StateOperators[0].NumRowsTotal
			}}
			for _, chunk := range [][]fixtures.Click{in[:restart], in[restart:]} {
				m.Add(chunk...)
				if err := runToEnd(t, w, ck.opts(runtime.Listener(count))...); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := text(sink.rows()), text(wantRows); !slices.Equal(got, want) {
				t.Errorf("%d rows kept, want %d (the first of each user and time)", len(got), len(want))
			}
			if late != wantLate {
				t.Errorf("%d rows dropped as late, want %d", late, wantLate)
			}
			if stateRows != int64(len(wantState)) {
				t.Errorf("progress says %d state rows, want %d", stateRows, len(wantState))
			}
			// What the checkpoint holds: each remembered user and time.
			c, meta := openCheckpoint(t, ck.fs)
			defer c.Close()
			got := map[string]time.Time{}
			err := c.Rows(meta, 0, "", func(r runtime.StateRow) error {
				var user string
				if err := json.Unmarshal(r.Key, &user); err != nil {
					return err
				}
				if r.ExpiresAt == nil {
					return fmt.Errorf("entry of %s without its time", user)
				}
				got[fmt.Sprint(user, "@", r.ExpiresAt.Unix())] = *r.ExpiresAt
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.EqualFunc(got, wantState, time.Time.Equal) {
				t.Errorf("the checkpoint remembers %d keys, want %d: %v, want %v", len(got), len(wantState), got, wantState)
			}
		})
	}
}

// TestDropDuplicatesWithEventTimeRefusesOldCheckpoint: a checkpoint of
// DropDuplicates (keys with an expiry index) is not read as one of
// DropDuplicatesWithEventTime (keys ordered by event time): the start is
// refused, saying what differs, and the checkpoint still serves
// DropDuplicates.
func TestDropDuplicatesWithEventTimeRefusesOldCheckpoint(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("a", 1), click("b", 30))
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 10*time.Second)
	key := func(c *fixtures.Click) string { return c.User }
	ck := newCheckpoint()
	if err := runToEnd(t, typed.WriteTo(typed.DropDuplicates(s, key), newSink[fixtures.Click]()), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	for _, allow := range []bool{false, true} {
		opts := ck.opts()
		if allow {
			opts = append(opts, runtime.AllowPipelineChanges())
		}
		err := runToEnd(t, typed.WriteTo(typed.DropDuplicatesWithEventTime(s, key), newSink[fixtures.Click]()), opts...)
		if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), `was dropDuplicates "func(*fixtures.Click) string", is now dropDuplicatesWithEventTime`) {
			t.Fatalf("allow changes %v: %v", allow, err)
		}
	}
	if err := runToEnd(t, typed.WriteTo(typed.DropDuplicates(s, key), newSink[fixtures.Click]()), ck.opts()...); err != nil {
		t.Fatalf("DropDuplicates again: %v", err)
	}
}

// TestDropDuplicatesWithEventTimeThenCount: distinct clicks counted per
// user after DropDuplicatesWithEventTime (Update mode), in batches of 7
// and with a restart, against the plain loop's kept rows counted per
// user. The aggregation's state goes through the state cache while the
// deduplication's range deletions, which the cache leaves out, run in
// the same batches: each user's last count must be the loop's.
func TestDropDuplicatesWithEventTimeThenCount(t *testing.T) {
	const delay, perBatch, restart = 10 * time.Second, 7, 100
	in := repeatedReadings(240, 9)
	var starts [][][]fixtures.Click
	for _, chunk := range [][]fixtures.Click{in[:restart], in[restart:]} {
		var batches [][]fixtures.Click
		for len(chunk) > 0 {
			n := min(perBatch, len(chunk))
			batches, chunk = append(batches, chunk[:n]), chunk[n:]
		}
		starts = append(starts, batches)
	}
	kept, _, _ := dedupModel(starts, delay)
	want := map[string]int64{}
	for _, c := range kept {
		want[c.User]++
	}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, delay)
	distinct := typed.DropDuplicatesWithEventTime(s, func(c *fixtures.Click) string { return c.User })
	byUser := typed.GroupByKey(distinct, func(c *fixtures.Click) string { return c.User })
	counts := typed.AggregateByKey(byUser, typed.Count[fixtures.Click](), func(user string, n int64) fixtures.UserCount {
		return fixtures.UserCount{User: user, Count: n}
	})
	sink := newSink[fixtures.UserCount]()
	w := typed.WriteTo(counts, sink).OutputMode(typed.Update)
	ck := newCheckpoint()
	for _, chunk := range [][]fixtures.Click{in[:restart], in[restart:]} {
		m.Add(chunk...)
		if err := runToEnd(t, w, ck.opts()...); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int64{}
	snapshot := sink.snapshot()
	for _, id := range slices.Sorted(maps.Keys(snapshot)) {
		for _, r := range snapshot[id] {
			got[r.User] = r.Count
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("distinct clicks per user %v, want %v", got, want)
	}
}

// TestDropDuplicatesWithEventTimeNeedsWatermark: without a watermark the
// query does not start, and says what to add.
func TestDropDuplicatesWithEventTimeNeedsWatermark(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1))
	w := typed.WriteTo(typed.DropDuplicatesWithEventTime(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }), newSink[fixtures.Click]())
	err := runToEnd(t, w, newCheckpoint().opts()...)
	if err == nil || !strings.Contains(err.Error(), "DropDuplicatesWithEventTime needs a watermark (WithWatermark before it)") {
		t.Fatalf("started without a watermark: %v", err)
	}
}

// TestDedupWithinWatermarkUsesItsOwnDelay: DropDuplicatesWithinWatermark
// keeps a key until the watermark passes its first time plus the delay of
// its own input's WithWatermark, as Spark's
// StreamingDeduplicateWithinWatermarkExec takes delayThresholdMs from its
// child's event-time column. Here the dedup reads stream A (delay 10 s),
// and B (delay 1000 s) is unioned after it: the query's last WithWatermark,
// whose delay the dedup took before, keeping k for 1000 s.
func TestDedupWithinWatermarkUsesItsOwnDelay(t *testing.T) {
	a := typed.NewMemoryStream[fixtures.Click]("a", 0)
	b := typed.NewMemoryStream[fixtures.Click]("b", 0)
	et := func(c *fixtures.Click) time.Time { return c.Time }
	deduped := typed.DropDuplicatesWithinWatermark(
		typed.WithWatermark(typed.FromMemory(a), et, 10*time.Second),
		func(c *fixtures.Click) string { return c.User })
	other := typed.Filter(typed.WithWatermark(typed.FromMemory(b), et, 1000*time.Second),
		func(*fixtures.Click) bool { return false }) // only moves B's mark
	sink := newSink[fixtures.Click]()
	w := typed.WriteTo(typed.Union(deduped, other), sink).OutputMode(typed.Append)
	ck := newCheckpoint()

	// Each step is a new run (AvailableNow); as in Spark, an input with no
	// rows since the restart counts as 0 for the min, so B gets a row each
	// step.
	// Plain-loop model of Spark: watermark = min over inputs of
	// (max event time of earlier batches - delay); a key is kept while
	// watermark < first + 10s; late when t <= previous batch's watermark.
	steps := []struct {
		a    []userAt
		b    []int
		want []string
	}{
		{a: []userAt{{"k", 100}}, b: []int{100000}, want: []string{"k@100"}}, // wm -> 90
		{a: []userAt{{"j", 200}}, b: []int{100000}, want: []string{"j@200"}}, // wm -> 190: k (expires 110) evicted
		{a: []userAt{{"k", 195}}, b: []int{100000}, want: []string{"k@195"}}, // 195 > 190: not late, k forgotten: emitted
	}
	for i, s := range steps {
		for _, c := range s.a {
			a.Add(fixtures.Click{User: c.user, Time: time.Unix(c.t, 0).UTC()})
		}
		for _, v := range s.b {
			b.Add(fixtures.Click{User: "x", Time: time.Unix(int64(v), 0).UTC()})
		}
		_, _, rows := runAvailableNow(t, w, ck, sink)
		var got []string
		for _, r := range slices.Concat(rows...) {
			got = append(got, fmt.Sprintf("%s@%d", r.User, r.Time.Unix()))
		}
		slices.Sort(got)
		if !slices.Equal(got, s.want) {
			t.Fatalf("step %d: got %q, want %q (Spark)", i, got, s.want)
		}
	}
}

type userAt struct {
	user string
	t    int64
}
