package typed_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// runAllToEnd starts ws with an AvailableNow trigger, waits for it and
// returns its progress reports.
func runAllToEnd(t *testing.T, ws *typed.Writers, opts ...runtime.Option) []runtime.QueryProgress {
	t.Helper()
	q, err := ws.Start(context.Background(), append(opts, runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	return q.RecentProgress()
}

// bigWindow is a window of at least three clicks of a user, a row of
// another type than the counts it is selected from.
type bigWindow struct {
	ID     string
	Clicks int
}

// TestWriteAllSharesTheOperator: one query writes a count per user and
// minute (Update mode) to one sink, the windows of three clicks or more
// as another type to a second, and the clicks of page p0, straight from
// the input, to a third. The count runs once (one operator, one state),
// and each sink gets its rows as a query of its own would: the counts
// those of a plain loop, the selection every count row of three or more
// in the batch that wrote it, the clicks every click of p0 once, in
// order. In one batch, in batches of 17 and 60, across a restart.
func TestWriteAllSharesTheOperator(t *testing.T) {
	in := orderedClicks(300)
	wantCounts := loopWindows(in, time.Minute, time.Minute)
	var wantP0 []fixtures.Click
	for _, c := range in {
		if c.Page == "p0" {
			wantP0 = append(wantP0, c)
		}
	}
	for _, perBatch := range []int{0, 17, 60} {
		t.Run(fmt.Sprintf("%d per batch", perBatch), func(t *testing.T) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
			s := typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second)
			counts := typed.AggregateWindows(typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute),
				func(c *fixtures.Click) string { return c.User }), typed.Count[fixtures.Click](), countRow)
			big := typed.Map(typed.Filter(counts, func(w *windowCount) bool { return w.Value >= 3 }),
				func(w *windowCount) bigWindow { return bigWindow{ID: w.id(), Clicks: int(w.Value)} })
			p0 := typed.Filter(s, func(c *fixtures.Click) bool { return c.Page == "p0" })
			countSink, bigSink, p0Sink := newSink[windowCount](), newSink[bigWindow](), newSink[fixtures.Click]()
			ws := typed.WriteAll(typed.WriteTo(counts, countSink), typed.WriteTo(big, bigSink), typed.WriteTo(p0, p0Sink))
			ck := newCheckpoint()
			third := len(in) / 3
			m.Add(in[:third]...)
			progress := runAllToEnd(t, ws, ck.opts()...)
			m.Add(in[third:]...)
			progress = append(progress, runAllToEnd(t, ws, ck.opts()...)...)

			countBatches, bigBatches, p0Batches := countSink.snapshot(), bigSink.snapshot(), p0Sink.snapshot()
			got := map[string]float64{}
			for _, rows := range sortedBatches(countBatches) {
				for _, r := range rows {
					got[r.id()] = r.Value
				}
			}
			sameTable(t, "counts", got, wantCounts)
			for id, rows := range countBatches {
				var want []bigWindow
				for _, r := range rows {
					if r.Value >= 3 {
						want = append(want, bigWindow{ID: r.id(), Clicks: int(r.Value)})
					}
				}
				if g := bigBatches[id]; !slices.Equal(g, want) {
					t.Fatalf("batch %d: the second sink got %v, want the counts of 3 or more the first got: %v", id, g, want)
				}
			}
			if g := slices.Concat(sortedBatches(p0Batches)...); !slices.EqualFunc(g, wantP0, sameClick) {
				t.Fatalf("the third sink got %d clicks, want the %d of p0 in order:\n%v\n%v", len(g), len(wantP0), g, wantP0)
			}

			for _, p := range progress {
				var logged int64
				for _, a := range runtime.LogAttrs(p) {
					if a.Key == runtime.LogOtherRowsOut {
						logged = a.Value.Int64()
					}
				}
				if n := int64(len(bigBatches[p.BatchID]) + len(p0Batches[p.BatchID])); logged != n {
					t.Fatalf("batch %d logs %d rows of the other sinks, they got %d", p.BatchID, logged, n)
				}
				if len(p.StateOperators) != 1 {
					t.Fatalf("batch %d reports %d state operators, want the one count the sinks share", p.BatchID, len(p.StateOperators))
				}
				if len(p.OtherSinks) != 2 {
					t.Fatalf("batch %d reports other sinks %+v, want the second and third", p.BatchID, p.OtherSinks)
				}
				if n := int64(len(countBatches[p.BatchID])); p.Sink.NumOutputRows != n {
					t.Fatalf("batch %d reports %d rows of the sink, it got %d", p.BatchID, p.Sink.NumOutputRows, n)
				}
				if n := int64(len(bigBatches[p.BatchID])); p.OtherSinks[0].NumOutputRows != n {
					t.Fatalf("batch %d reports %d rows of the second sink, it got %d", p.BatchID, p.OtherSinks[0].NumOutputRows, n)
				}
				if n := int64(len(p0Batches[p.BatchID])); p.OtherSinks[1].NumOutputRows != n {
					t.Fatalf("batch %d reports %d rows of the third sink, it got %d", p.BatchID, p.OtherSinks[1].NumOutputRows, n)
				}
			}
		})
	}
}

func sameClick(a, b fixtures.Click) bool {
	return a.User == b.User && a.Page == b.Page && a.Time.Equal(b.Time)
}

// TestWriteAllLateRowsPerBranch: a WithWatermark (delay 10 s) read by
// four outputs: counts per user and minute, two minutes and hour, and the
// clicks themselves. A click at 30 s, read after the watermark has reached
// 90 s, is late for its minute and its two minutes, which have closed, and
// not for its hour: the minute counts leave it out and count it dropped,
// the hour count and the clicks keep it, and LateRows gets it once.
func TestWriteAllLateRowsPerBranch(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	late := newSink[fixtures.Click]()
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 10*time.Second, typed.LateRows[fixtures.Click](late))
	user := func(c *fixtures.Click) string { return c.User }
	// The minute counts read it through a stage of their own.
	copied := typed.Map(s, func(c *fixtures.Click) fixtures.Click { return *c })
	minutes := typed.AggregateWindows(typed.GroupByWindow(copied, clickTime, typed.Tumbling(time.Minute), user), typed.Count[fixtures.Click](), countRow)
	twoMinutes := typed.AggregateWindows(typed.GroupByWindow(copied, clickTime, typed.Tumbling(2*time.Minute), user), typed.Count[fixtures.Click](), countRow)
	hours := typed.AggregateWindows(typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Hour), user), typed.Count[fixtures.Click](), countRow)
	minuteSink, twoMinuteSink, hourSink, clickSink := newSink[windowCount](), newSink[windowCount](), newSink[windowCount](), newSink[fixtures.Click]()
	// The hours first: each branch's rows are judged by its own operator,
	// not by the first's.
	q, err := typed.WriteAll(typed.WriteTo(hours, hourSink), typed.WriteTo(s, clickSink), typed.WriteTo(minutes, minuteSink), typed.WriteTo(twoMinutes, twoMinuteSink)).
		Start(context.Background(), runtime.PollInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	// The watermark a batch drops by is the one the batch before ran
	// with: 90 s from the third batch on.
	for _, sec := range []int{100, 101} {
		m.Add(click("ann", sec))
		if err := q.ProcessAllAvailable(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	m.Add(click("ann", 30))
	if err := q.ProcessAllAvailable(context.Background()); err != nil {
		t.Fatal(err)
	}
	latest := func(s *batchSink[windowCount]) map[string]float64 {
		out := map[string]float64{}
		for _, rows := range sortedBatches(s.snapshot()) {
			for _, r := range rows {
				out[r.id()] = r.Value
			}
		}
		return out
	}
	window := func(sec int, size time.Duration) string {
		start := at(sec).Truncate(size).UTC()
		return windowCount{Window: typed.Window{Start: start, End: start.Add(size)}, User: "ann"}.id()
	}
	hour := at(0).Truncate(time.Hour).UTC()
	sameTable(t, "minutes", latest(minuteSink), map[string]float64{window(100, time.Minute): 2})
	sameTable(t, "two minutes", latest(twoMinuteSink), map[string]float64{window(100, 2*time.Minute): 2})
	sameTable(t, "hours", latest(hourSink), map[string]float64{windowCount{Window: typed.Window{Start: hour, End: hour.Add(time.Hour)}, User: "ann"}.id(): 3})
	if got := slices.Concat(sortedBatches(clickSink.snapshot())...); len(got) != 3 {
		t.Fatalf("the clicks' sink got %v, want the three clicks", got)
	}
	if got := slices.Concat(sortedBatches(late.snapshot())...); len(got) != 1 || !sameClick(got[0], click("ann", 30)) {
		t.Fatalf("LateRows got %v, want the click at 30 s once", got)
	}
	p, _ := q.LastProgress()
	var dropped []int64
	for _, op := range p.StateOperators {
		dropped = append(dropped, op.NumRowsDroppedByWatermark)
	}
	if !slices.Equal(dropped, []int64{0, 1, 1}) {
		t.Fatalf("the counts dropped %v rows as late, want 0 (hours), 1 (minutes) and 1 (two minutes)", dropped)
	}
}

// TestWriteAllRefuses: a query of several outputs is refused where its
// outputs disagree on the output mode, and where a query of one of them
// alone would be refused although the operator in question is compiled
// for another output first.
func TestWriteAllRefuses(t *testing.T) {
	user := func(c *fixtures.Click) string { return c.User }
	source := func() typed.Stream[fixtures.Click] {
		return typed.WithWatermark(typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("clicks", 0)), clickTime, 10*time.Second)
	}
	minutes := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		return typed.AggregateWindows(typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute), user), typed.Count[fixtures.Click](), countRow)
	}
	for _, tc := range []struct {
		name    string
		outputs func() []typed.Output
		want    string
	}{{
		name: "modes set apart",
		outputs: func() []typed.Output {
			s := source()
			return []typed.Output{typed.WriteTo(minutes(s), newSink[windowCount]()).OutputMode(typed.Update),
				typed.WriteTo(s, newSink[fixtures.Click]()).OutputMode(typed.Append)}
		},
		want: "the outputs set different output modes",
	}, {
		name: "operators' modes apart",
		outputs: func() []typed.Output {
			s := source()
			counts := typed.FlatMapGroupsWithState(typed.GroupByKey(s, user), typed.Append, typed.NoTimeout, (&recorder{}).fn)
			return []typed.Output{typed.WriteTo(counts, newSink[fixtures.UserCount]()), typed.WriteTo(minutes(s), newSink[windowCount]())}
		},
		want: "the outputs' operators give different output modes",
	}, {
		name: "a deduplication within the watermark of a shared count's rows",
		outputs: func() []typed.Output {
			counts := minutes(source())
			return []typed.Output{typed.WriteTo(counts, newSink[windowCount]()).OutputMode(typed.Append),
				typed.WriteTo(typed.DropDuplicatesWithinWatermark(counts, func(w *windowCount) string { return w.id() }), newSink[windowCount]())}
		},
		want: "come out of a stateful operator",
	}, {
		name: "an aggregation after a shared count in Update mode",
		outputs: func() []typed.Output {
			counts := minutes(source())
			total := typed.AggregateByKey(typed.GroupByKey(counts, func(w *windowCount) string { return w.User }),
				typed.Sum(func(w *windowCount) float64 { return w.Value }),
				func(user string, n float64) windowCount { return windowCount{User: user, Value: n} })
			return []typed.Output{typed.WriteTo(counts, newSink[windowCount]()), typed.WriteTo(total, newSink[windowCount]())}
		},
		want: "follows windowedAggregate",
	}, {
		name: "an output without an aggregation in Complete mode",
		outputs: func() []typed.Output {
			s := source()
			return []typed.Output{typed.WriteTo(minutes(s), newSink[windowCount]()).OutputMode(typed.Complete),
				typed.WriteTo(s, newSink[fixtures.Click]())}
		},
		want: "output 2 (*typed_test.batchSink[github.com/streamgen/streamgen/generated/fixtures.Click]) has no streaming aggregation",
	}, {
		name: "the same output twice",
		outputs: func() []typed.Output {
			w := typed.WriteTo(source(), newSink[fixtures.Click]())
			return []typed.Output{w, w}
		},
		want: "output 2 of WriteAll is output 1 again",
	}, {
		name: "one sink for two outputs",
		outputs: func() []typed.Output {
			s := source()
			sink := newSink[fixtures.Click]()
			ann := typed.Filter(s, func(c *fixtures.Click) bool { return c.User == "ann" })
			return []typed.Output{typed.WriteTo(s, newSink[fixtures.Click]()), typed.WriteTo(ann, sink), typed.WriteTo(s, sink)}
		},
		want: "output 3 of WriteAll writes to the sink of output 2",
	}, {
		name: "two files sinks of one directory",
		outputs: func() []typed.Output {
			s := source()
			dir := t.TempDir()
			counts := typed.MapGroupsWithState(typed.GroupByKey(s, user), typed.NoTimeout, countClicks)
			return []typed.Output{typed.WriteTo(s, typed.FilesSink[fixtures.Click](dir)),
				typed.WriteTo(s, typed.FilesSink[fixtures.Click](t.TempDir())),
				typed.WriteTo(counts, typed.FilesSink[fixtures.UserCount](dir+"/sub/.."))}
		},
		want: "output 3 of WriteAll (files:",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := typed.WriteAll(tc.outputs()...).Start(context.Background())
			if err == nil {
				q.Stop()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestWriteAllForeachBatches: two ForeachBatch sinks, funcs, which
// cannot be compared, are two sinks, each getting its output's rows; so
// are two ForeachSinks of writers that cannot be compared, and two
// values of a sink type of size zero.
func TestWriteAllForeachBatches(t *testing.T) {
	src := typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("none", 0))
	for _, outs := range [][]typed.Output{
		{typed.WriteTo(src, typed.ForeachSink[fixtures.Click](listWriter{})), typed.WriteTo(src, typed.ForeachSink[fixtures.Click](listWriter{}))},
		{typed.WriteTo(src, zeroSink{}), typed.WriteTo(src, zeroSink{})},
	} {
		runAllToEnd(t, typed.WriteAll(outs...))
	}

	m := typed.NewMemoryStream[fixtures.Click]("clicks", 7)
	in := clicks(30, 3)
	m.Add(in...)
	var all, ann int
	count := func(n *int) typed.Sink[fixtures.Click] {
		return typed.ForeachBatch(func(_ context.Context, _ int64, rows []fixtures.Click) error {
			*n += len(rows)
			return nil
		})
	}
	s := typed.FromMemory(m)
	runAllToEnd(t, typed.WriteAll(typed.WriteTo(s, count(&all)), typed.WriteTo(typed.Filter(s, func(c *fixtures.Click) bool { return c.User == "ann" }), count(&ann))))
	wantAnn := 0
	for _, c := range in {
		if c.User == "ann" {
			wantAnn++
		}
	}
	if all != len(in) || ann != wantAnn || wantAnn == 0 {
		t.Fatalf("the sinks got %d and %d rows, want %d and %d", all, ann, len(in), wantAnn)
	}
}

// listWriter is a ForeachWriter that cannot be compared.
type listWriter struct{ rows []string }

func (listWriter) Open(int, int64) (bool, error) { return true, nil }
func (listWriter) Process(fixtures.Click) error  { return nil }
func (listWriter) Close(error)                   {}

// zeroSink is a sink of size zero.
type zeroSink struct{}

func (zeroSink) Write(context.Context, int64, []fixtures.Click) error { return nil }

// TestWriteAllJoinsAStaticTable: two outputs read one join of the clicks
// with a static table of users' teams, and a third joins the table again:
// each gets the joined rows of a plain loop (the first all of them, the
// second those of team red, the third the clicks of team blue, from a join of
// its own), and
// the table loads once.
func TestWriteAllJoinsAStaticTable(t *testing.T) {
	type member struct{ User, Team string }
	teams := []member{{"ann", "red"}, {"bob", "blue"}, {"cy", "red"}, {"dee", "blue"}}
	in := clicks(60, 4)
	var want, wantRed []string
	var wantBlue []fixtures.Click
	for _, c := range in {
		for _, m := range teams {
			if m.User == c.User {
				want = append(want, c.User+" "+m.Team+" "+c.Page)
				if m.Team == "red" {
					wantRed = append(wantRed, c.User+" "+m.Team+" "+c.Page)
				}
				if m.Team == "blue" {
					wantBlue = append(wantBlue, fixtures.Click{User: m.Team, Time: c.Time, Page: c.Page})
				}
			}
		}
	}
	var loads int
	table := typed.TableFromFunc(func(context.Context) ([]member, error) {
		loads++
		return teams, nil
	}, func(m *member) string { return m.User })
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 7)
	m.Add(in...)
	src := typed.FromMemory(m)
	joined := typed.JoinTable(src, func(c *fixtures.Click) string { return c.User }, table, typed.Inner,
		func(j typed.Joined[string, fixtures.Click, member]) string {
			return j.Key + " " + j.Right.Team + " " + j.Left.Page
		})
	red := typed.Filter(joined, func(s *string) bool { return strings.Contains(*s, " red ") })
	// The clicks with the user's team in place of the user, of team blue.
	blue := typed.Filter(typed.JoinTable(src, func(c *fixtures.Click) string { return c.User }, table, typed.Inner,
		func(j typed.Joined[string, fixtures.Click, member]) fixtures.Click {
			return fixtures.Click{User: j.Right.Team, Time: j.Left.Time, Page: j.Left.Page}
		}), func(c *fixtures.Click) bool { return c.User == "blue" })
	all, reds, blues := newSink[string](), newSink[string](), newSink[fixtures.Click]()
	runAllToEnd(t, typed.WriteAll(typed.WriteTo(joined, all), typed.WriteTo(red, reds), typed.WriteTo(blue, blues)))
	if loads != 1 {
		t.Fatalf("the table loaded %d times, want once", loads)
	}
	if got := slices.Concat(sortedBatches(all.snapshot())...); !slices.Equal(got, want) {
		t.Fatalf("the first output got %v, want %v", got, want)
	}
	if got := slices.Concat(sortedBatches(reds.snapshot())...); !slices.Equal(got, wantRed) {
		t.Fatalf("the second output got %v, want %v", got, wantRed)
	}
	var gotBlue []fixtures.Click
	for _, b := range blues.snapshot() {
		gotBlue = append(gotBlue, b...)
	}
	slices.SortFunc(gotBlue, func(a, b fixtures.Click) int { return a.Time.Compare(b.Time) })
	if !slices.Equal(gotBlue, wantBlue) {
		t.Fatalf("the third output got %v, want %v", gotBlue, wantBlue)
	}
}

// TestOneOutputKeepsItsOperators: a query of one output that reads a
// stateful operator's rows twice (a union of a deduplication's rows with
// a selection of them) compiles the operator twice, as it always has, so
// that its checkpoint's operators stay what they were; two outputs of
// WriteAll that read it share one.
func TestOneOutputKeepsItsOperators(t *testing.T) {
	in := clicks(30, 2)
	users := map[string]bool{}
	for _, c := range in {
		users[c.User] = true
	}
	for _, tc := range []struct {
		name string
		ws   func(d typed.Stream[fixtures.Click]) *typed.Writers
		ops  int
	}{
		{"one output", func(d typed.Stream[fixtures.Click]) *typed.Writers {
			return typed.WriteAll(typed.WriteTo(typed.Union(d, typed.Filter(d, func(c *fixtures.Click) bool { return c.User == "ann" })), newSink[fixtures.Click]()))
		}, 2},
		{"two outputs", func(d typed.Stream[fixtures.Click]) *typed.Writers {
			return typed.WriteAll(typed.WriteTo(d, newSink[fixtures.Click]()), typed.WriteTo(typed.Filter(d, func(c *fixtures.Click) bool { return c.User == "ann" }), newSink[fixtures.Click]()))
		}, 1},
		{"one output, through a watermark", func(d typed.Stream[fixtures.Click]) *typed.Writers {
			w := typed.WithWatermark(d, clickTime, time.Minute)
			return typed.WriteAll(typed.WriteTo(typed.Union(w, typed.Filter(w, func(c *fixtures.Click) bool { return c.User == "ann" })), newSink[fixtures.Click]()))
		}, 2},
		{"two outputs, through a watermark", func(d typed.Stream[fixtures.Click]) *typed.Writers {
			w := typed.WithWatermark(d, clickTime, time.Minute)
			return typed.WriteAll(typed.WriteTo(w, newSink[fixtures.Click]()), typed.WriteTo(typed.Filter(w, func(c *fixtures.Click) bool { return c.User == "ann" }), newSink[fixtures.Click]()))
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			m.Add(in...)
			d := typed.DropDuplicates(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
			for _, p := range runAllToEnd(t, tc.ws(d)) {
				if len(p.StateOperators) != tc.ops {
					t.Fatalf("batch %d reports %d operators, want %d", p.BatchID, len(p.StateOperators), tc.ops)
				}
				for _, op := range p.StateOperators {
					if op.NumRowsTotal != int64(len(users)) {
						t.Fatalf("an operator holds %d keys, want the %d users", op.NumRowsTotal, len(users))
					}
				}
			}
		})
	}
}
