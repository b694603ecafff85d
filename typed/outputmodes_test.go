package typed_test

import (
	"context"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/typed"
)

// countProcessor is a transformWithState processor that counts each
// user's clicks in a value state and writes the count after each call.
type countProcessor struct{ n *typed.ValueState[int64] }

func (p *countProcessor) Init(h *typed.Handle) error {
	p.n = typed.NewValueState[int64](h, "n")
	return nil
}

func (p *countProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(fixtures.UserCount)) error {
	n, _, err := p.n.Get(ctx)
	if err != nil {
		return err
	}
	for range rows {
		n++
	}
	emit(fixtures.UserCount{User: user, Count: n})
	return p.n.Update(ctx, n)
}

// TestSparkOutputModeMatrix replays the output-mode cases of Spark's
// UnsupportedOperationsSuite through the API: each pipeline starts or is
// refused as Spark's UnsupportedOperationChecker decides, with Spark's
// reason in the message.
func TestSparkOutputModeMatrix(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("b", 2), click("a", 3))
	clicks := typed.FromMemory(m)
	watermarked := typed.WithWatermark(clicks, func(c *fixtures.Click) time.Time { return c.Time }, time.Second)
	byUser := func(s typed.Stream[fixtures.Click]) typed.KeyedStream[string, fixtures.Click] {
		return typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User })
	}
	flat := func(s typed.Stream[fixtures.Click], mode typed.OutputMode, timeout typed.Timeout) typed.Stream[fixtures.UserCount] {
		return typed.FlatMapGroupsWithState(byUser(s), mode, timeout,
			func(user string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
				out, err := countClicks(user, rows, st)
				emit(out)
				if timeout == typed.EventTimeTimeout {
					return st.SetTimeoutTimestamp(at(1000))
				}
				return err
			})
	}
	mapped := func(s typed.Stream[fixtures.Click]) typed.Stream[fixtures.UserCount] {
		return typed.MapGroupsWithState(byUser(s), typed.NoTimeout, countClicks)
	}
	processor := func(mode typed.OutputMode) typed.Stream[fixtures.UserCount] {
		return typed.TransformWithState(byUser(clicks), &countProcessor{}, typed.TimeModeNone, mode)
	}
	// Downstream operators over user counts.
	countsByUser := func(s typed.Stream[fixtures.UserCount]) typed.KeyedStream[string, fixtures.UserCount] {
		return typed.GroupByKey(s, func(u *fixtures.UserCount) string { return u.User })
	}
	aggregated := func(s typed.Stream[fixtures.UserCount]) typed.Stream[userStat] {
		return typed.AggregateByKey(countsByUser(s), typed.Count[fixtures.UserCount](), func(u string, n int64) userStat { return userStat{u, float64(n)} })
	}
	// An aggregation's rows made clicks again, for an operator after it.
	asClicks := func(s typed.Stream[userStat]) typed.Stream[fixtures.Click] {
		return typed.Map(s, func(u *userStat) fixtures.Click { return fixtures.Click{User: u.User, Time: at(int(u.Value))} })
	}

	userCounts := newSink[fixtures.UserCount]()
	stats := newSink[userStat]()
	clickSink := newSink[fixtures.Click]()
	for _, tc := range []struct {
		name string
		w    interface {
			start() error
		}
		refused string // "" when Spark accepts it
	}{
		// transformWithState: no rule of its own (Spark's initial-state
		// suites run an Append processor in an Update query).
		{"transformWithState Append in Update", writer(processor(typed.Append), userCounts, typed.Update), ""},
		{"transformWithState Update in Append", writer(processor(typed.Update), userCounts, typed.Append), ""},
		{"transformWithState in Complete", writer(processor(typed.Append), userCounts, typed.Complete), "does not support the Complete output mode"},
		// flatMapGroupsWithState without an aggregation: its mode is the
		// query's.
		{"flatMapGroupsWithState Append in Update", writer(flat(clicks, typed.Append, typed.NoTimeout), userCounts, typed.Update), `flatMapGroupsWithState in append mode is not supported with Update output mode`},
		{"flatMapGroupsWithState Update in Append", writer(flat(clicks, typed.Update, typed.NoTimeout), userCounts, typed.Append), `flatMapGroupsWithState in update mode is not supported with Append output mode`},
		// With an aggregation: Append only.
		{"flatMapGroupsWithState Append, then aggregation", writer(aggregated(flat(clicks, typed.Append, typed.NoTimeout)), stats, typed.Update), ""},
		{"flatMapGroupsWithState Update, then aggregation", writer(aggregated(flat(clicks, typed.Update, typed.NoTimeout)), stats, typed.Update), `flatMapGroupsWithState in update mode is not supported with aggregation`},
		{"aggregation, then flatMapGroupsWithState Append in Update", writer(flat(asClicks(aggregated(flat(clicks, typed.Append, typed.NoTimeout))), typed.Append, typed.NoTimeout), userCounts, typed.Update), "possible 'correctness' issue due to global watermark"},
		// mapGroupsWithState: Update, once.
		{"mapGroupsWithState in Append", writer(mapped(clicks), userCounts, typed.Append), `mapGroupsWithState is not supported with Append output mode`},
		{"mapGroupsWithState, then aggregation in Update", writer(aggregated(mapped(clicks)), stats, typed.Update), ""},
		{"aggregation in Update, then mapGroupsWithState", writer(mapped(asClicks(aggregated(flat(clicks, typed.Append, typed.NoTimeout)))), userCounts, typed.Update), "possible 'correctness' issue due to global watermark"},
		{"two mapGroupsWithState", writer(mapped(typed.Map(mapped(clicks), func(u *fixtures.UserCount) fixtures.Click { return fixtures.Click{User: u.User} })), userCounts, typed.Update), "Multiple mapGroupsWithStates are not supported"},
		{"mapGroupsWithState and flatMapGroupsWithState", writer(mapped(typed.Map(flat(clicks, typed.Update, typed.NoTimeout), func(u *fixtures.UserCount) fixtures.Click { return fixtures.Click{User: u.User} })), userCounts, typed.Update), "Mixing mapGroupsWithStates and flatMapGroupsWithStates are not supported"},
		// Several flatMapGroupsWithState: all in Append mode, in Append.
		{"two flatMapGroupsWithState in Append", writer(flat(typed.Map(flat(clicks, typed.Append, typed.NoTimeout), func(u *fixtures.UserCount) fixtures.Click { return fixtures.Click{User: u.User} }), typed.Append, typed.NoTimeout), userCounts, typed.Append), ""},
		{"two flatMapGroupsWithState, one in Update", writer(flat(typed.Map(flat(clicks, typed.Update, typed.NoTimeout), func(u *fixtures.UserCount) fixtures.Click { return fixtures.Click{User: u.User} }), typed.Append, typed.NoTimeout), userCounts, typed.Append), "Multiple flatMapGroupsWithStates are not supported when they are not all in append mode"},
		// A stateful operator after an event-time timeout is refused; after
		// a processing-time one it is not.
		{"event-time timeout, then aggregation", writer(aggregated(flat(watermarked, typed.Append, typed.EventTimeTimeout)), stats, typed.Update), "possible 'correctness' issue due to global watermark"},
		{"processing-time timeout, then aggregation", writer(aggregated(flat(clicks, typed.Append, typed.ProcessingTimeTimeout)), stats, typed.Update), ""},
		// Aggregations: Append needs windows and a watermark; chained, they
		// need Append.
		{"aggregation in Append without windows", writer(aggregated(flat(clicks, typed.Append, typed.NoTimeout)), stats, typed.Append), "Append output mode not supported when there are streaming aggregations on streaming DataFrames/DataSets without watermark"},
		{"aggregation in Update, then aggregation", writer(aggregated(flat(asClicks(aggregated(flat(clicks, typed.Append, typed.NoTimeout))), typed.Append, typed.NoTimeout)), stats, typed.Update), "possible 'correctness' issue due to global watermark"},
		{"aggregation in Complete, then dropDuplicates", writer(typed.DropDuplicates(asClicks(aggregated(flat(clicks, typed.Append, typed.NoTimeout))), func(c *fixtures.Click) string { return c.User }), clickSink, typed.Complete), ""},
		{"aggregation in Complete, then dropDuplicatesWithinWatermark", writer(typed.DropDuplicatesWithinWatermark(typed.WithWatermark(asClicks(aggregated(flat(clicks, typed.Append, typed.NoTimeout))), func(c *fixtures.Click) time.Time { return c.Time }, 0), func(c *fixtures.Click) string { return c.User }), clickSink, typed.Complete), "possible 'correctness' issue due to global watermark"},
		{"Complete without an aggregation", writer(flat(clicks, typed.Update, typed.NoTimeout), userCounts, typed.Complete), "Complete output mode not supported when there are no streaming aggregations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.w.start()
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("err = %v, want one saying %q", err, tc.refused)
			}
		})
	}
}

// modeCase is a writer in a given output mode, run to its end.
type modeCase[T any] struct {
	w *typed.Writer[T]
}

func writer[T any](s typed.Stream[T], sink typed.Sink[T], mode typed.OutputMode) modeCase[T] {
	return modeCase[T]{typed.WriteTo(s, sink).OutputMode(mode)}
}

func (c modeCase[T]) start() error {
	q, err := c.w.Start(context.Background(), newCheckpoint().opts()...)
	if err != nil {
		return err
	}
	q.Stop()
	return nil
}

// TestTransformWithStateAppendInUpdateQuery: an Append processor runs in
// an Update query (as Spark's initial-state suites do), and writes what it
// emits.
func TestTransformWithStateAppendInUpdateQuery(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1)
	m.Add(click("a", 1), click("b", 2), click("a", 3))
	out := typed.TransformWithState(typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }), &countProcessor{}, typed.TimeModeNone, typed.Append)
	sink := newSink[fixtures.UserCount]()
	if err := runToEnd(t, typed.WriteTo(out, sink).OutputMode(typed.Update), newCheckpoint().opts()...); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range sink.rows() {
		got = append(got, rowText(r))
	}
	if want := []string{"a count=1", "b count=1", "a count=2"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
}
