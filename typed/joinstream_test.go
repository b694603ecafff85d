package typed_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Spark's StreamingJoinSuite, replayed step by step. A row of either side
// is a fixtures.Click: User is the key (a number), Time the event time
// and Page the value. Each step adds rows and runs the query until it has
// done all it can (its batch, then the batches without data that the
// moved watermark calls for), as Spark's CheckNewAnswer; state checks
// read the total of the last batch and sum the updated and dropped rows
// since the previous check, as Spark's assertNumStateRows.

// sparkJoin drives one join query on a manual clock.
type sparkJoin struct {
	t           *testing.T
	left, right *typed.MemoryStream[fixtures.Click]
	w           *typed.Writer[string]
	sink        *batchSink[string]
	ck          *checkpoint
	clock       *runtime.ManualClock
	q           *typed.Query
	opts        []runtime.Option
	seen        map[int64]bool // batches whose rows were checked
	counted     map[int64]bool // batches whose state figures were summed
}

// joinRow makes a side's row: key, time in seconds and value.
func joinRow(key, sec, value int) fixtures.Click {
	return fixtures.Click{User: strconv.Itoa(key), Time: time.Unix(int64(sec), 0).UTC(), Page: strconv.Itoa(value)}
}

// valueRowsM makes Spark's setupStream rows: key v, time v s, value v*m.
func valueRowsM(m int, vs ...int) []fixtures.Click {
	var out []fixtures.Click
	for _, v := range vs {
		out = append(out, joinRow(v, v, v*m))
	}
	return out
}

// pairRows makes Spark's setupJoinWithRangeCondition rows: (key, time)
// pairs, value key*m.
func pairRows(m int, pairs ...[2]int) []fixtures.Click {
	var out []fixtures.Click
	for _, p := range pairs {
		out = append(out, joinRow(p[0], p[1], p[0]*m))
	}
	return out
}

func newSparkJoin(t *testing.T, build func(left, right typed.Stream[fixtures.Click]) typed.Stream[string], opts ...runtime.Option) *sparkJoin {
	h := &sparkJoin{t: t, opts: opts, left: typed.NewMemoryStream[fixtures.Click]("left", 0), right: typed.NewMemoryStream[fixtures.Click]("right", 0),
		sink: newSink[string](), ck: newCheckpoint(), clock: runtime.NewManualClock(time.Unix(1_000_000, 0)),
		seen: map[int64]bool{}, counted: map[int64]bool{}}
	h.w = typed.WriteTo(build(typed.FromMemory(h.left), typed.FromMemory(h.right)), h.sink)
	h.start()
	return h
}

func (h *sparkJoin) start() {
	h.t.Helper()
	q, err := h.w.Start(h.t.Context(), h.ck.opts(append([]runtime.Option{runtime.WithManualClock(h.clock), runtime.PollInterval(time.Second)}, h.opts...)...)...)
	if err != nil {
		h.t.Fatal(err)
	}
	h.q = q
	h.settle()
}

func (h *sparkJoin) settle() {
	h.t.Helper()
	if err := h.clock.WaitUntilWaiting(h.t.Context()); err != nil {
		h.t.Fatalf("the query did not settle: %v (%v)", err, h.q.Err())
	}
	if err := h.q.Err(); err != nil {
		h.t.Fatal(err)
	}
}

func (h *sparkJoin) restart() {
	h.t.Helper()
	if err := h.q.Stop(); err != nil {
		h.t.Fatal(err)
	}
	h.start()
}

// add adds rows to either side, in one batch (Spark's MultiAddData when
// both have rows).
func (h *sparkJoin) add(left, right []fixtures.Click) {
	h.t.Helper()
	h.left.Add(left...)
	h.right.Add(right...)
	h.clock.Advance(time.Second)
	h.settle()
}

// check compares the rows written since the last check with want, in any
// order (Spark's CheckNewAnswer).
func (h *sparkJoin) check(step string, want ...string) {
	h.t.Helper()
	var got []string
	for id, rows := range h.sink.snapshot() {
		if !h.seen[id] {
			h.seen[id] = true
			got = append(got, rows...)
		}
	}
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		h.t.Fatalf("%s: new rows %q, want %q", step, got, want)
	}
}

// state checks the state rows of the last batch, and the rows updated and
// dropped by the watermark since the last state check (Spark's
// assertNumStateRows).
func (h *sparkJoin) state(step string, total, updated int64, dropped ...int64) {
	h.t.Helper()
	var u, d int64
	var last runtime.QueryProgress
	for _, p := range h.q.RecentProgress() {
		last = p
		if h.counted[p.BatchID] {
			continue
		}
		h.counted[p.BatchID] = true
		u += p.StateOperators[0].NumRowsUpdated
		d += p.StateOperators[0].NumRowsDroppedByWatermark
	}
	if len(last.StateOperators) == 0 {
		h.t.Fatalf("%s: no batch has run", step)
	}
	got := last.StateOperators[0]
	var wantDropped int64
	if len(dropped) > 0 {
		wantDropped = dropped[0]
	}
	if got.NumRowsTotal != total || u != updated || d != wantDropped {
		h.t.Fatalf("%s: state rows total %d, updated %d, dropped %d; want %d, %d, %d", step, got.NumRowsTotal, u, d, total, updated, wantDropped)
	}
}

func (h *sparkJoin) stop() { h.q.Stop() }

// The rows' fields as numbers.
func keyOf(c *fixtures.Click) int           { n, _ := strconv.Atoi(c.User); return n }
func valueOf(c *fixtures.Click) int         { n, _ := strconv.Atoi(c.Page); return n }
func secondsOf(c *fixtures.Click) int       { return int(c.Time.Unix()) }
func clickTime(c *fixtures.Click) time.Time { return c.Time }
func byKey(s typed.Stream[fixtures.Click]) typed.KeyedStream[string, fixtures.Click] {
	return typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User })
}
func watermarked(s typed.Stream[fixtures.Click], delay time.Duration) typed.Stream[fixtures.Click] {
	return typed.WithWatermark(s, clickTime, delay)
}

// tuple shows a row of the output as Spark prints one: nil as null.
func tuple(parts ...any) string {
	var s []string
	for _, p := range parts {
		switch v := p.(type) {
		case nil:
			s = append(s, "null")
		case *int:
			if v == nil {
				s = append(s, "null")
			} else {
				s = append(s, strconv.Itoa(*v))
			}
		default:
			s = append(s, fmt.Sprint(v))
		}
	}
	return "(" + strings.Join(s, ",") + ")"
}

// of returns a field of a side's row, nil when the side is padded.
func of(c *fixtures.Click, f func(*fixtures.Click) int) *int {
	if c == nil {
		return nil
	}
	v := f(c)
	return &v
}

// "stream stream inner join on non-time column": no watermark, state kept
// for ever, across restarts.
func TestSparkJoinInnerOnKey(t *testing.T) {
	h := newSparkJoin(t, func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
		return typed.Join(byKey(l), byKey(r), typed.Inner, func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
			return tuple(j.Key, valueOf(j.Left), valueOf(j.Right))
		})
	})
	defer h.stop()
	h.add(valueRowsM(2, 1), nil)
	h.check("L+1")
	h.add(nil, valueRowsM(3, 1, 10))
	h.check("R+1,10", "(1,2,3)")
	h.add(valueRowsM(2, 10), nil)
	h.check("L+10", "(10,20,30)")
	h.add(nil, valueRowsM(3, 1))
	h.check("R+1", "(1,2,3)")
	h.restart()
	h.add(valueRowsM(2, 1), nil)
	h.check("L+1 after a restart: both right 1s", "(1,2,3)", "(1,2,3)")
	h.restart()
	h.add(valueRowsM(2, 100), nil)
	h.add(nil, valueRowsM(3, 100))
	h.check("L+100; R+100", "(100,200,300)")
}

// windowedJoin is Spark's setupWindowedJoin: both sides on key and
// 10-second window, (key, window end, left value, right value).
func windowedJoin(how typed.JoinType, leftDelay, rightDelay time.Duration, opts ...typed.JoinOption) func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
	return func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
		if leftDelay >= 0 {
			l = watermarked(l, leftDelay)
		}
		if rightDelay >= 0 {
			r = watermarked(r, rightDelay)
		}
		opts = append([]typed.JoinOption{typed.JoinOnWindows(typed.Tumbling(10 * time.Second))}, opts...)
		return typed.Join(byKey(l), byKey(r), how, func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
			end := j.Window.End.Unix()
			switch how {
			case typed.LeftSemi:
				return tuple(j.Key, end, valueOf(j.Left))
			case typed.RightOuter:
				return tuple(j.Key, end, of(j.Left, valueOf), of(j.Right, valueOf))
			}
			return tuple(j.Key, end, of(j.Left, valueOf), of(j.Right, valueOf))
		}, opts...)
	}
}

// "stream stream inner join on windows - without watermark".
func TestSparkJoinInnerOnWindowsWithoutWatermark(t *testing.T) {
	h := newSparkJoin(t, windowedJoin(typed.Inner, -1, -1, typed.JoinLeftTime(clickTime), typed.JoinRightTime(clickTime)))
	defer h.stop()
	h.add(valueRowsM(2, 1), nil)
	h.check("L+1")
	h.add(nil, valueRowsM(3, 1))
	h.check("R+1", "(1,10,2,3)")
	h.restart()
	h.add(valueRowsM(2, 25), nil)
	h.check("L+25")
	h.restart()
	h.add(nil, valueRowsM(3, 25))
	h.check("R+25", "(25,30,50,75)")
	h.add(valueRowsM(2, 1), nil)
	h.check("L+1: state kept", "(1,10,2,3)")
	h.restart()
	h.add(valueRowsM(2, 5), nil)
	h.check("L+5")
	h.add(nil, valueRowsM(3, 5))
	h.check("R+5", "(5,10,10,15)")
}

// "stream stream inner join on windows - with watermark": a watermark on
// the left side only; both sides forget a window at its end.
func TestSparkJoinInnerOnWindowsWithWatermark(t *testing.T) {
	h := newSparkJoin(t, windowedJoin(typed.Inner, 10*time.Second, -1, typed.JoinRightTime(clickTime)))
	defer h.stop()
	h.add(valueRowsM(2, 1), nil)
	h.check("L+1")
	h.state("L+1", 1, 1)
	h.add(nil, valueRowsM(3, 1))
	h.check("R+1", "(1,10,2,3)")
	h.state("R+1", 2, 1)
	h.restart()
	h.add(valueRowsM(2, 25), nil) // watermark 15: window [0, 10) goes
	h.check("L+25")
	h.state("L+25", 1, 1)
	h.add(nil, valueRowsM(3, 25))
	h.check("R+25", "(25,30,50,75)")
	h.state("R+25", 2, 1)
	h.restart()
	h.add(nil, valueRowsM(3, 1)) // not kept: its window is past the watermark
	h.check("R+1")
	h.state("R+1 late", 2, 0)
	h.add(valueRowsM(2, 5), nil) // late: its window's end is at or before the watermark
	h.check("L+5")
	h.state("L+5 late", 2, 0, 1)
}

// rangeJoin is Spark's setupJoinWithRangeCondition: (key, time) rows,
// watermarks of delays on both sides, a condition, and the output
// (leftKey, rightKey, leftTime, rightTime).
func rangeJoin(how typed.JoinType, leftDelay, rightDelay time.Duration, cond typed.TimeCondition) func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
	return func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
		return typed.Join(byKey(watermarked(l, leftDelay)), byKey(watermarked(r, rightDelay)), how,
			func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
				if how == typed.LeftSemi {
					return tuple(keyOf(j.Left), secondsOf(j.Left))
				}
				return tuple(of(j.Left, keyOf), of(j.Right, keyOf), of(j.Left, secondsOf), of(j.Right, secondsOf))
			}, typed.JoinWithin(cond))
	}
}

// "stream stream inner join with time range - with watermark - one side
// condition": leftTime < rightTime - 5 s; the right side forgets, the
// left never does.
func TestSparkJoinInnerOneSideCondition(t *testing.T) {
	h := newSparkJoin(t, func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
		return typed.Join(byKey(watermarked(l, 10*time.Second)), byKey(watermarked(r, 10*time.Second)), typed.Inner,
			func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
				return tuple(keyOf(j.Left), secondsOf(j.Left), secondsOf(j.Right))
			}, typed.JoinWithin(typed.LeftBefore(-5*time.Second)))
	})
	defer h.stop()
	h.add(pairRows(2, [2]int{1, 5}), nil)
	h.check("L+(1,5)")
	h.add(nil, pairRows(3, [2]int{1, 11}))
	h.check("R+(1,11)", "(1,5,11)")
	h.add(nil, pairRows(3, [2]int{1, 10}))
	h.check("R+(1,10)")
	h.state("after (1,10)", 3, 3)
	h.add(pairRows(2, [2]int{1, 3}, [2]int{1, 30}), nil)
	h.check("L+(1,3),(1,30)", "(1,3,10)", "(1,3,11)")
	h.state("after (1,30)", 5, 2)
	h.add(nil, pairRows(3, [2]int{0, 30}))
	h.check("R+(0,30)")
	h.state("watermark 20: the right forgets (1,10), (1,11)", 4, 1)
	h.add(nil, pairRows(3, [2]int{1, 20}, [2]int{1, 21}, [2]int{1, 28}))
	h.check("R+(1,20),(1,21),(1,28)", "(1,3,21)", "(1,5,21)", "(1,3,28)", "(1,5,28)")
	h.state("(1,20) late, (1,21) not kept", 5, 1, 1)
	h.add(pairRows(2, [2]int{1, 20}, [2]int{1, 21}), nil)
	h.check("L+(1,20),(1,21)", "(1,21,28)")
	h.state("(1,20) late", 6, 1, 1)
}

// "stream stream inner join with time range - with watermark - two side
// conditions": left watermark 20 s, right 30 s, left BETWEEN right - 10 s
// AND right + 5 s.
func TestSparkJoinInnerTwoSideConditions(t *testing.T) {
	h := newSparkJoin(t, func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
		return typed.Join(byKey(watermarked(l, 20*time.Second)), byKey(watermarked(r, 30*time.Second)), typed.Inner,
			func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
				return tuple(keyOf(j.Left), secondsOf(j.Left), secondsOf(j.Right))
			}, typed.JoinWithin(typed.TimeBetween(-10*time.Second, 5*time.Second)))
	})
	defer h.stop()
	h.add(pairRows(2, [2]int{1, 20}), nil)
	h.check("L+(1,20)")
	h.add(nil, pairRows(3, [2]int{1, 14}, [2]int{1, 15}, [2]int{1, 25}, [2]int{1, 26}, [2]int{1, 30}, [2]int{1, 31}))
	h.check("R+...", "(1,20,15)", "(1,20,25)", "(1,20,26)", "(1,20,30)")
	h.state("R+...", 7, 7)
	h.add(nil, pairRows(3, [2]int{1, 60}))
	h.check("R+(1,60)")
	h.add(pairRows(2, [2]int{1, 49}, [2]int{1, 50}, [2]int{1, 65}, [2]int{1, 66}), nil)
	h.check("L+...", "(1,50,60)", "(1,65,60)")
	h.state("watermark 30: the right forgets 14, 15", 10, 5)
	h.add(pairRows(2, [2]int{1, 30}, [2]int{1, 31}), nil)
	h.check("L+(1,30),(1,31)", "(1,31,26)", "(1,31,30)", "(1,31,31)")
	h.state("(1,30) late", 11, 1, 1)
	h.add(nil, pairRows(3, [2]int{1, 80}))
	h.check("R+(1,80)")
	h.state("watermark 46: the left forgets 20, 31; the right 25 to 31", 6, 1)
	h.add(nil, pairRows(3, [2]int{1, 46}, [2]int{1, 50}))
	h.check("R+(1,46),(1,50)", "(1,49,50)", "(1,50,50)")
	h.state("(1,46) late", 7, 1, 1)
}

// windowedCondJoin is Spark's setupWindowedJoinWithLeftCondition (a
// condition on the left value) or ...RightCondition (on the right value):
// both watermarked 10 s, on key and window. A condition on the side a
// join pads stays in the join (a padded row is written at once for a
// row that fails it); on the other side, Spark pushes it into that side's
// input, as a Filter before the join does here.
func windowedCondJoin(how typed.JoinType, leftCond bool) func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
	return func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
		l, r = watermarked(l, 10*time.Second), watermarked(r, 10*time.Second)
		keepsLeft := how == typed.LeftOuter || how == typed.FullOuter
		keepsRight := how == typed.RightOuter || how == typed.FullOuter
		leftOK := func(c *fixtures.Click) bool { return valueOf(c) > 4 }
		rightOK := func(c *fixtures.Click) bool { return valueOf(c) > 7 }
		var pre []typed.JoinOption
		switch {
		case leftCond && keepsLeft:
			pre = append(pre, typed.JoinLeftFilter(leftOK))
		case leftCond:
			l = typed.Filter(l, leftOK)
		case keepsRight:
			pre = append(pre, typed.JoinRightFilter(rightOK))
		default:
			r = typed.Filter(r, rightOK)
		}
		opts := append([]typed.JoinOption{typed.JoinOnWindows(typed.Tumbling(10 * time.Second))}, pre...)
		return typed.Join(byKey(l), byKey(r), how, func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
			end := j.Window.End.Unix()
			rv := func() string {
				if j.Right == nil {
					return "null"
				}
				return strconv.Quote(j.Right.Page)
			}
			switch how {
			case typed.LeftSemi:
				return tuple(keyOf(j.Left), end, valueOf(j.Left))
			case typed.LeftOuter:
				return tuple(keyOf(j.Left), end, valueOf(j.Left), rv())
			case typed.RightOuter:
				return tuple(keyOf(j.Right), end, of(j.Left, valueOf), rv())
			case typed.FullOuter:
				lk, le, rk, re := "null", "null", "null", "null"
				if j.Left != nil {
					lk, le = strconv.Itoa(keyOf(j.Left)), strconv.Itoa(int(end))
				}
				if j.Right != nil {
					rk, re = strconv.Itoa(keyOf(j.Right)), strconv.Itoa(int(end))
				}
				return tuple(lk, le, of(j.Left, valueOf), rk, re, rv())
			}
			return tuple(keyOf(j.Left), end, valueOf(j.Left), rv())
		}, opts...)
	}
}

// StreamingOuterJoinSuite: "left outer early state exclusion on left/right",
// "right outer early state exclusion on left/right".
func TestSparkJoinOuterEarlyStateExclusion(t *testing.T) {
	type step struct {
		left, right []int
		want        []string
		total, upd  int64
	}
	for _, tc := range []struct {
		name     string
		how      typed.JoinType
		leftCond bool
		steps    []step
	}{
		{"left outer, condition on left", typed.LeftOuter, true, []step{
			{[]int{1, 2, 3}, []int{3, 4, 5}, []string{`(3,10,6,"9")`, "(1,10,2,null)", "(2,10,4,null)"}, 4, 4},
			{[]int{20}, []int{21}, nil, -1, 0},
			{nil, []int{20}, []string{`(20,30,40,"60")`}, -1, 0},
		}},
		{"left outer, condition on right", typed.LeftOuter, false, []step{
			{[]int{3, 4, 5}, []int{1, 2, 3}, []string{`(3,10,6,"9")`}, 4, 4},
			{[]int{20}, []int{21}, []string{"(4,10,8,null)", "(5,10,10,null)"}, -1, 0},
			{nil, []int{20}, []string{`(20,30,40,"60")`}, -1, 0},
		}},
		{"right outer, condition on left", typed.RightOuter, true, []step{
			{[]int{1, 2, 3}, []int{3, 4, 5}, []string{`(3,10,6,"9")`}, 4, 4},
			{[]int{20}, []int{21}, []string{`(4,10,null,"12")`, `(5,10,null,"15")`}, -1, 0},
			{nil, []int{20}, []string{`(20,30,40,"60")`}, -1, 0},
		}},
		{"right outer, condition on right", typed.RightOuter, false, []step{
			{[]int{3, 4, 5}, []int{1, 2, 3}, []string{`(3,10,6,"9")`, `(1,10,null,"3")`, `(2,10,null,"6")`}, 4, 4},
			{[]int{20}, []int{21}, nil, -1, 0},
			{nil, []int{20}, []string{`(20,30,40,"60")`}, -1, 0},
		}},
		{"full outer, condition on left", typed.FullOuter, true, []step{
			{[]int{1, 2, 3}, []int{3, 4, 5}, []string{"(1,10,2,null,null,null)", "(2,10,4,null,null,null)", `(3,10,6,3,10,"9")`}, 4, 4},
			{[]int{20}, []int{21}, []string{`(null,null,null,4,10,"12")`, `(null,null,null,5,10,"15")`}, 2, 2},
			{nil, []int{20}, []string{`(20,30,40,20,30,"60")`}, 3, 1},
		}},
		{"full outer, condition on right", typed.FullOuter, false, []step{
			{[]int{3, 4, 5}, []int{1, 2, 3}, []string{`(null,null,null,1,10,"3")`, `(null,null,null,2,10,"6")`, `(3,10,6,3,10,"9")`}, 4, 4},
			{[]int{20}, []int{21}, []string{"(4,10,8,null,null,null)", "(5,10,10,null,null,null)"}, 2, 2},
			{nil, []int{20}, []string{`(20,30,40,20,30,"60")`}, 3, 1},
		}},
		{"left semi, condition on left", typed.LeftSemi, true, []step{
			{[]int{1, 2, 3}, []int{3, 4, 5}, []string{"(3,10,6)"}, 4, 4},
			{[]int{20}, []int{21}, nil, 2, 2},
			{nil, []int{20}, []string{"(20,30,40)"}, 3, 1},
		}},
		{"left semi, condition on right", typed.LeftSemi, false, []step{
			{[]int{3, 4, 5}, []int{1, 2, 3}, []string{"(3,10,6)"}, 4, 4},
			{[]int{20}, []int{21}, nil, 2, 2},
			{nil, []int{20}, []string{"(20,30,40)"}, 3, 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSparkJoin(t, windowedCondJoin(tc.how, tc.leftCond))
			defer h.stop()
			for i, s := range tc.steps {
				h.add(valueRowsM(2, s.left...), valueRowsM(3, s.right...))
				h.check(fmt.Sprintf("step %d", i+1), s.want...)
				if s.total >= 0 {
					h.state(fmt.Sprintf("step %d", i+1), s.total, s.upd)
				}
			}
		})
	}
}

// "windowed left outer join", "windowed right outer join", "windowed full
// outer join", "windowed left semi join".
func TestSparkJoinWindowedOuter(t *testing.T) {
	for _, tc := range []struct {
		how    typed.JoinType
		padded []string
		last   string
		semi   bool
	}{
		{typed.LeftOuter, []string{"(1,10,2,null)", "(2,10,4,null)"}, "(22,30,44,66)", false},
		{typed.RightOuter, []string{"(6,10,null,18)", "(7,10,null,21)"}, "(22,30,44,66)", false},
		{typed.FullOuter, []string{"(1,10,2,null)", "(2,10,4,null)", "(6,10,null,18)", "(7,10,null,21)"}, "(22,30,44,66)", false},
		{typed.LeftSemi, nil, "(22,30,44)", true},
	} {
		t.Run(tc.how.String(), func(t *testing.T) {
			h := newSparkJoin(t, windowedJoin(tc.how, 10*time.Second, 10*time.Second))
			defer h.stop()
			h.add(valueRowsM(2, 1, 2, 3, 4, 5), valueRowsM(3, 3, 4, 5, 6, 7))
			if tc.semi {
				h.check("first", "(3,10,6)", "(4,10,8)", "(5,10,10)")
			} else {
				h.check("first", "(3,10,6,9)", "(4,10,8,12)", "(5,10,10,15)")
			}
			if tc.how == typed.FullOuter || tc.semi {
				h.state("first", 10, 10)
			}
			h.add(valueRowsM(2, 21), valueRowsM(3, 22)) // watermark 11
			h.check("second", tc.padded...)
			switch tc.how {
			case typed.FullOuter, typed.LeftSemi:
				h.state("second", 2, 2)
			default:
				h.state("second", 2, 12)
			}
			h.add(valueRowsM(2, 22), nil)
			h.check("third", tc.last)
			if tc.semi {
				h.state("third: a matched left row is not kept", 2, 0)
			} else {
				h.state("third", 3, 1)
			}
			if tc.how == typed.FullOuter || tc.semi {
				total := int64(3)
				if tc.semi {
					total = 2
				}
				h.restart()
				h.add(valueRowsM(2, 1), nil)
				h.check("late left")
				h.state("late left", total, 0, 1)
				h.add(nil, valueRowsM(3, 5))
				h.check("late right")
				h.state("late right", total, 0, 1)
			}
		})
	}
}

// "left outer with watermark range condition", "right outer ...", "full
// outer join with watermark range condition", "left semi join with
// watermark range condition": 10 s watermarks, left BETWEEN right - 5 s
// AND right + 5 s.
func TestSparkJoinOuterRangeCondition(t *testing.T) {
	cond := typed.TimeBetween(-5*time.Second, 5*time.Second)
	for _, how := range []typed.JoinType{typed.LeftOuter, typed.RightOuter} {
		t.Run(how.String(), func(t *testing.T) {
			h := newSparkJoin(t, rangeJoin(how, 10*time.Second, 10*time.Second, cond))
			defer h.stop()
			h.add(pairRows(2, [2]int{1, 5}, [2]int{3, 5}), nil)
			h.check("L+(1,5),(3,5)")
			h.add(nil, pairRows(3, [2]int{1, 10}, [2]int{2, 5}))
			h.check("R+(1,10),(2,5)", "(1,1,5,10)")
			h.add(nil, pairRows(3, [2]int{1, 11}))
			h.check("R+(1,11)")
			h.state("R+(1,11)", 5, 5)
			h.add(pairRows(2, [2]int{1, 7}, [2]int{1, 30}), nil)
			h.check("L+(1,7),(1,30)", "(1,1,7,10)", "(1,1,7,11)")
			h.state("L+(1,7),(1,30)", 7, 2)
			outer := "(3,null,5,null)"
			if how == typed.RightOuter {
				outer = "(null,2,null,5)"
			}
			h.add(nil, pairRows(3, [2]int{0, 30}))
			h.check("R+(0,30)", outer)
			h.state("R+(0,30)", 2, 1)
		})
	}
	t.Run("FullOuter", func(t *testing.T) {
		h := newSparkJoin(t, rangeJoin(typed.FullOuter, 10*time.Second, 10*time.Second, cond))
		defer h.stop()
		h.add(pairRows(2, [2]int{1, 5}, [2]int{3, 5}), nil)
		h.check("1")
		h.state("1", 2, 2)
		h.add(nil, pairRows(3, [2]int{1, 10}, [2]int{2, 5}))
		h.check("2", "(1,1,5,10)")
		h.state("2", 4, 2)
		h.add(nil, pairRows(3, [2]int{1, 9}))
		h.check("3", "(1,1,5,9)")
		h.state("3", 5, 1)
		h.add(pairRows(2, [2]int{1, 7}, [2]int{1, 30}), nil)
		h.check("4", "(1,1,7,9)", "(1,1,7,10)")
		h.state("4", 7, 2)
		h.add(nil, pairRows(3, [2]int{0, 30}))
		h.check("5", "(3,null,5,null)", "(null,2,null,5)")
		h.state("5", 2, 1)
	})
	t.Run("LeftSemi", func(t *testing.T) {
		h := newSparkJoin(t, rangeJoin(typed.LeftSemi, 10*time.Second, 10*time.Second, cond))
		defer h.stop()
		h.add(pairRows(2, [2]int{1, 5}, [2]int{3, 5}), nil)
		h.check("1")
		h.state("1", 2, 2)
		h.add(nil, pairRows(3, [2]int{1, 10}, [2]int{2, 5}))
		h.check("2", "(1,5)")
		h.state("2", 4, 2)
		h.add(nil, pairRows(3, [2]int{1, 9}))
		h.check("3: already matched")
		h.state("3", 5, 1)
		h.add(pairRows(2, [2]int{1, 7}, [2]int{1, 30}), nil)
		h.check("4", "(1,7)")
		h.state("4: (1,7) matched, not kept", 6, 1)
		h.add(nil, pairRows(3, [2]int{0, 30}))
		h.check("5")
		h.state("5", 2, 1)
	})
}

// selfJoin is Spark's setupSelfJoin: one stream; the left is every row,
// the right the rows of even ids, both watermarked 5 s; rightTime >=
// leftTime AND rightTime <= leftTime + 5 s (mirrored for a right outer
// join). Spark infers the right's filter for the left of an inner or
// semi join; so does a Filter here.
func selfJoin(how typed.JoinType) func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
	return func(l, _ typed.Stream[fixtures.Click]) typed.Stream[string] {
		even := func(c *fixtures.Click) bool { return keyOf(c)%2 == 0 }
		all, evens := l, typed.Filter(l, even)
		left, right := all, evens
		cond := typed.TimeBetween(-5*time.Second, 0)
		switch how {
		case typed.RightOuter:
			left, right = evens, all
			cond = typed.TimeBetween(0, 5*time.Second)
		case typed.Inner, typed.LeftSemi:
			left = typed.Filter(all, even)
		}
		return typed.Join(byKey(watermarked(left, 5*time.Second)), byKey(watermarked(right, 5*time.Second)), how,
			func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
				if how == typed.LeftSemi {
					return tuple(keyOf(j.Left), secondsOf(j.Left))
				}
				return tuple(of(j.Left, keyOf), of(j.Left, secondsOf), of(j.Right, keyOf), of(j.Right, secondsOf))
			}, typed.JoinWithin(cond))
	}
}

func selfRows(from, to int) []fixtures.Click {
	var out []fixtures.Click
	for v := from; v <= to; v++ {
		out = append(out, joinRow(v, v, v))
	}
	return out
}

// "SPARK-26187 self left outer join should not return outer nulls for
// already matched rows", "... self right outer join ...", "self full outer
// join", "self left semi join".
func TestSparkSelfJoin(t *testing.T) {
	for _, tc := range []struct {
		how    typed.JoinType
		want   [3][]string
		states [3][2]int64
	}{
		{typed.LeftOuter, [3][]string{{"(2,2,2,2)", "(4,4,4,4)"}, {"(6,6,6,6)", "(8,8,8,8)", "(10,10,10,10)"}, {"(12,12,12,12)", "(14,14,14,14)", "(1,1,null,null)", "(3,3,null,null)"}},
			[3][2]int64{{7, 7}, {13, 8}, {15, 7}}},
		{typed.RightOuter, [3][]string{{"(2,2,2,2)", "(4,4,4,4)"}, {"(6,6,6,6)", "(8,8,8,8)", "(10,10,10,10)"}, {"(12,12,12,12)", "(14,14,14,14)", "(null,null,1,1)", "(null,null,3,3)"}},
			[3][2]int64{{7, 7}, {13, 8}, {15, 7}}},
		{typed.FullOuter, [3][]string{{"(2,2,2,2)", "(4,4,4,4)"}, {"(6,6,6,6)", "(8,8,8,8)", "(10,10,10,10)"}, {"(12,12,12,12)", "(14,14,14,14)", "(1,1,null,null)", "(3,3,null,null)"}},
			[3][2]int64{{7, 7}, {13, 8}, {15, 7}}},
		{typed.LeftSemi, [3][]string{{"(2,2)", "(4,4)"}, {"(6,6)", "(8,8)", "(10,10)"}, {"(12,12)", "(14,14)"}},
			[3][2]int64{{4, 4}, {8, 6}, {9, 4}}},
	} {
		t.Run(tc.how.String(), func(t *testing.T) {
			h := newSparkJoin(t, selfJoin(tc.how))
			defer h.stop()
			for i, rows := range [3][2]int{{1, 5}, {6, 10}, {11, 15}} {
				h.add(selfRows(rows[0], rows[1]), nil)
				h.check(fmt.Sprintf("+%d..%d", rows[0], rows[1]), tc.want[i]...)
				h.state(fmt.Sprintf("+%d..%d", rows[0], rows[1]), tc.states[i][0], tc.states[i][1])
			}
		})
	}
}

// "stream stream self join": a stream joined with itself on value % 5.
func TestSparkSelfJoinOnKey(t *testing.T) {
	h := newSparkJoin(t, func(l, _ typed.Stream[fixtures.Click]) typed.Stream[string] {
		key := func(c *fixtures.Click) int { return keyOf(c) % 5 }
		return typed.Join(typed.GroupByKey(l, key), typed.GroupByKey(l, key), typed.Inner,
			func(j typed.Joined[int, fixtures.Click, fixtures.Click]) string {
				return tuple(j.Key, keyOf(j.Left), keyOf(j.Right))
			})
	})
	defer h.stop()
	h.add(selfRows(1, 2), nil)
	h.check("+1,2", "(1,1,1)", "(2,2,2)")
	h.restart()
	h.add([]fixtures.Click{joinRow(3, 3, 3), joinRow(6, 6, 6)}, nil)
	h.check("+3,6", "(3,3,3)", "(1,1,6)", "(1,6,1)", "(1,6,6)")
}

// "join between three streams": the output of a join joined again.
func TestSparkJoinThreeStreams(t *testing.T) {
	third := typed.NewMemoryStream[fixtures.Click]("third", 0)
	h := newSparkJoin(t, func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
		first := typed.Join(byKey(l), byKey(r), typed.Inner, func(j typed.Joined[string, fixtures.Click, fixtures.Click]) fixtures.UserCount {
			return fixtures.UserCount{User: j.Key, Count: int64(valueOf(j.Left)*1000 + valueOf(j.Right))}
		})
		return typed.Join(typed.GroupByKey(first, func(u *fixtures.UserCount) string { return u.User }), byKey(typed.FromMemory(third)), typed.Inner,
			func(j typed.Joined[string, fixtures.UserCount, fixtures.Click]) string {
				return tuple(j.Key, j.Left.Count/1000, j.Key, j.Left.Count%1000, j.Key, valueOf(j.Right))
			})
	})
	defer h.stop()
	third.Add(valueRowsM(5, 5, 10)...)
	h.add(valueRowsM(2, 1, 5), valueRowsM(3, 1, 5, 10))
	h.check("all three", "(5,10,5,15,5,25)")
}

// "left outer join with non-key condition violated": on key and window,
// leftValue > 10 (the kept side's own condition, in the join) and
// (rightValue < 300 OR rightValue > 1000) (the other side's, which Spark
// pushes below the right side's watermark: its rows do not move it).
func TestSparkJoinLeftOuterNonKeyCondition(t *testing.T) {
	h := newSparkJoin(t, func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
		r = typed.Filter(r, func(c *fixtures.Click) bool { return valueOf(c) < 300 || valueOf(c) > 1000 })
		return typed.Join(byKey(watermarked(l, 10*time.Second)), byKey(watermarked(r, 10*time.Second)), typed.LeftOuter,
			func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
				return tuple(keyOf(j.Left), j.Window.End.Unix(), valueOf(j.Left), of(j.Right, valueOf))
			}, typed.JoinOnWindows(typed.Tumbling(10*time.Second)), typed.JoinLeftFilter(func(c *fixtures.Click) bool { return valueOf(c) > 10 }))
	})
	defer h.stop()
	steps := []struct {
		left, right []int
		want        []string
		total, upd  int64
	}{
		{[]int{1, 2, 3}, []int{1, 2, 3}, []string{"(1,10,2,null)", "(2,10,4,null)", "(3,10,6,null)"}, 3, 3},
		{[]int{20}, []int{21}, nil, 2, 2},
		{nil, []int{20}, []string{"(20,30,40,60)"}, 3, 1},
		{[]int{40, 41}, []int{40, 41}, []string{"(40,50,80,120)", "(41,50,82,123)"}, 4, 4},
		{[]int{70}, []int{71}, nil, 2, 2},
		{nil, []int{70}, []string{"(70,80,140,210)"}, 3, 1},
		{[]int{101, 102, 103}, []int{101, 102, 103}, nil, 6, 3},
		{[]int{1000}, []int{1001}, []string{"(101,110,202,null)", "(102,110,204,null)", "(103,110,206,null)"}, 2, 2},
	}
	for i, s := range steps {
		h.add(valueRowsM(2, s.left...), valueRowsM(3, s.right...))
		h.check(fmt.Sprintf("step %d", i+1), s.want...)
		h.state(fmt.Sprintf("step %d", i+1), s.total, s.upd)
	}
}

// eventRows makes rows of "abc" at instants of a day, with a text value.
func eventRows(rows ...[2]string) []fixtures.Click {
	var out []fixtures.Click
	for _, r := range rows {
		at, err := time.Parse("2006-01-02 15:04:05", r[0])
		if err != nil {
			panic(err)
		}
		out = append(out, fixtures.Click{User: "abc", Time: at.UTC(), Page: r[1]})
	}
	return out
}

func eventTuple(c *fixtures.Click) []any {
	if c == nil {
		return []any{"null", "null", "null"}
	}
	return []any{c.Time.Format("01-02 15:04:05"), c.User, c.Page}
}

// eventJoin is the left outer join of SPARK-32148 and SPARK-38684: on the
// key, left BETWEEN right - 30 s AND right + 30 s.
func eventJoin(leftDelay, rightDelay time.Duration) func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
	return func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
		return typed.Join(byKey(watermarked(l, leftDelay)), byKey(watermarked(r, rightDelay)), typed.LeftOuter,
			func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
				return tuple(append(eventTuple(j.Left), eventTuple(j.Right)...)...)
			}, typed.JoinWithin(typed.TimeBetween(-30*time.Second, 30*time.Second)))
	}
}

// "SPARK-32148 stream-stream join regression on Spark 3.0.0": watermarks
// of 2 and 4 minutes, one batch.
func TestSparkJoinRegression32148(t *testing.T) {
	h := newSparkJoin(t, eventJoin(2*time.Minute, 4*time.Minute))
	defer h.stop()
	h.add(eventRows([2]string{"2020-01-01 00:00:00", "has no join partner"}, [2]string{"2020-01-02 00:00:00", "joined with A"}, [2]string{"2020-01-02 01:00:00", "joined with B"}),
		eventRows([2]string{"2020-01-02 00:00:10", "A"}, [2]string{"2020-01-02 00:59:59", "B"}, [2]string{"2020-01-02 02:00:00", "C"}))
	h.check("one batch",
		"(01-01 00:00:00,abc,has no join partner,null,null,null)",
		"(01-02 00:00:00,abc,joined with A,01-02 00:00:10,abc,A)",
		"(01-02 01:00:00,abc,joined with B,01-02 00:59:59,abc,B)")
}

// "SPARK-38684: outer join works correctly even if processing input rows
// and evicting state rows for same grouping key happens in the same
// micro-batch": no batches without data, watermarks of 0 s.
func TestSparkJoinRegression38684(t *testing.T) {
	h := newSparkJoin(t, eventJoin(0, 0), runtime.NoDataBatches(false))
	defer h.stop()
	h.add(eventRows([2]string{"2020-01-02 00:00:00", "left in batch 1"}), eventRows([2]string{"2020-01-02 00:01:00", "right in batch 1"}))
	h.check("batch 1")
	h.add(eventRows([2]string{"2020-01-02 01:00:00", "left in batch 2"}), eventRows([2]string{"2020-01-02 01:01:00", "right in batch 2"}))
	h.check("batch 2")
	h.add(eventRows([2]string{"2020-01-02 01:30:00", "left in batch 3"}), nil)
	h.check("batch 3", "(01-02 00:00:00,abc,left in batch 1,null,null,null)")
	h.add(nil, eventRows([2]string{"2020-01-02 01:30:10", "match with left in batch 3"}))
	h.check("batch 4",
		"(01-02 01:00:00,abc,left in batch 2,null,null,null)",
		"(01-02 01:30:00,abc,left in batch 3,01-02 01:30:10,abc,match with left in batch 3)")
}

// "SPARK-35896: metrics in StateOperatorProgress are output correctly":
// the join's report names it and counts the rows removed, and its custom
// metrics say how many rows each side keeps.
func TestSparkJoinMetrics(t *testing.T) {
	h := newSparkJoin(t, windowedJoin(typed.Inner, 10*time.Second, -1, typed.JoinRightTime(clickTime)))
	defer h.stop()
	last := func() runtime.StateOperatorProgress {
		p, _ := h.q.LastProgress()
		return p.StateOperators[0]
	}
	h.add(valueRowsM(2, 1), nil)
	h.add(nil, valueRowsM(3, 1))
	h.check("R+1", "(1,10,2,3)")
	if m := last(); m.OperatorName != "symmetricHashJoin" || m.NumRowsTotal != 2 || m.NumRowsUpdated != 1 || m.NumRowsRemoved != 0 {
		t.Fatalf("after R+1: %+v", m)
	}
	h.add(valueRowsM(2, 25), nil)
	var removed int64
	for _, p := range h.q.RecentProgress()[2:] {
		removed += p.StateOperators[0].NumRowsRemoved
	}
	if m := last(); m.NumRowsTotal != 1 || removed != 2 {
		t.Fatalf("after L+25: %+v, %d removed, want a total of 1 and 2 removed", m, removed)
	}
	// The rows each side keeps, in the report and across a restart.
	if m := last(); m.CustomMetrics["numLeftRows"] != 1 || m.CustomMetrics["numRightRows"] != 0 {
		t.Fatalf("after L+25: custom metrics %v, want one left row, no right row", m.CustomMetrics)
	}
	h.restart()
	h.add(nil, valueRowsM(3, 25, 26))
	if m := last(); m.CustomMetrics["numLeftRows"] != 1 || m.CustomMetrics["numRightRows"] != 2 {
		t.Fatalf("after a restart and R+25,26: custom metrics %v, want one left row, two right rows", m.CustomMetrics)
	}
}

// TestJoinAgainstALoop: every join type with a time condition, over random
// rows of both sides (a few seconds out of order, never late), writes what
// a plain loop over all pairs writes, whatever the batches (a row per
// batch, a few, all at once), across a restart, at the end of the input
// (FlushEventTime writes the padded rows still kept).
func TestJoinAgainstALoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	gen := func(n, m int) []fixtures.Click {
		var rows []fixtures.Click
		for i := range n {
			// Times rise by half a second a row, up to 4.9 s out of order:
			// never late for a delay of 5 s, and close to it (after the
			// epoch, where the watermark starts).
			at := time.Unix(1000, 0).Add(time.Duration(i)*500*time.Millisecond + time.Duration(rng.IntN(4900))*time.Millisecond)
			rows = append(rows, fixtures.Click{User: strconv.Itoa(rng.IntN(3)), Time: at.UTC(), Page: strconv.Itoa(i * m)})
		}
		return rows
	}
	left, right := gen(300, 1), gen(300, 1000)
	cond := typed.TimeBetween(-4*time.Second, 2*time.Second).And(typed.LeftAtOrBefore(2 * time.Second))
	text := func(l, r *fixtures.Click) string { return tuple(of(l, valueOf), of(r, valueOf)) }
	// The plain loop: every pair of one key whose times meet the
	// condition; the rows of a kept side without one, padded.
	want := map[typed.JoinType][]string{}
	leftMatched, rightMatched := make([]bool, len(left)), make([]bool, len(right))
	for i := range left {
		for j := range right {
			d := left[i].Time.Sub(right[j].Time)
			if left[i].User == right[j].User && d >= -4*time.Second && d <= 2*time.Second {
				leftMatched[i], rightMatched[j] = true, true
				for _, how := range []typed.JoinType{typed.Inner, typed.LeftOuter, typed.RightOuter, typed.FullOuter} {
					want[how] = append(want[how], text(&left[i], &right[j]))
				}
			}
		}
	}
	for i := range left {
		if !leftMatched[i] {
			want[typed.LeftOuter] = append(want[typed.LeftOuter], text(&left[i], nil))
			want[typed.FullOuter] = append(want[typed.FullOuter], text(&left[i], nil))
		} else {
			want[typed.LeftSemi] = append(want[typed.LeftSemi], text(&left[i], nil))
		}
	}
	for j := range right {
		if !rightMatched[j] {
			want[typed.RightOuter] = append(want[typed.RightOuter], text(nil, &right[j]))
			want[typed.FullOuter] = append(want[typed.FullOuter], text(nil, &right[j]))
		}
	}
	for how, rows := range want {
		if len(rows) < 50 {
			t.Fatalf("%v: the loop writes %d rows: the case tests little", how, len(rows))
		}
	}
	for _, how := range []typed.JoinType{typed.Inner, typed.LeftOuter, typed.RightOuter, typed.FullOuter, typed.LeftSemi} {
		for _, perBatch := range []int{1, 7, 0} {
			for _, restart := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/rows-per-batch=%d/restart=%v", how, perBatch, restart), func(t *testing.T) {
					l := typed.NewMemoryStream[fixtures.Click]("left", perBatch)
					r := typed.NewMemoryStream[fixtures.Click]("right", perBatch)
					joined := typed.Join(byKey(watermarked(typed.FromMemory(l), 5*time.Second)), byKey(watermarked(typed.FromMemory(r), 5*time.Second)), how,
						func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string { return text(j.Left, j.Right) },
						typed.JoinWithin(cond))
					sink := newSink[string]()
					w := typed.WriteTo(joined, sink)
					ck := newCheckpoint()
					half := 0
					if restart {
						half = len(left) / 2
						l.Add(left[:half]...)
						r.Add(right[:half]...)
						if err := runToEnd(t, w, ck.opts()...); err != nil {
							t.Fatal(err)
						}
					}
					l.Add(left[half:]...)
					r.Add(right[half:]...)
					if err := runToEnd(t, w, ck.opts(runtime.FlushEventTime())...); err != nil {
						t.Fatal(err)
					}
					if got, want := sortedRows(sink.rows()), sortedRows(want[how]); !slices.Equal(got, want) {
						t.Fatalf("%d rows, want %d; first difference:\n%s", len(got), len(want), firstDifference(got, want))
					}
				})
			}
		}
	}
}

// Kafka Streams' KStreamKStreamJoinTest "testWindowing": an inner join of
// records of keys 0 to 3 within 100 ms before or after
// (JoinWindows.ofTimeDifferenceWithNoGrace(100)), both bounds inclusive,
// a step of records at a time, each joining what came before.
func TestKafkaStreamsJoinWindowing(t *testing.T) {
	ms := func(n int) time.Time { return time.Unix(0, int64(n)*int64(time.Millisecond)).UTC() }
	h := newSparkJoin(t, func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
		return typed.Join(byKey(l), byKey(r), typed.Inner, func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
			return j.Key + ":" + j.Left.Page + "+" + j.Right.Page
		}, typed.JoinLeftTime(clickTime), typed.JoinRightTime(clickTime), typed.JoinWithin(typed.TimeBetween(-100*time.Millisecond, 100*time.Millisecond)))
	})
	defer h.stop()
	// rows makes records of keys 0 to n-1, values prefix+key, at ts (+k
	// with spread).
	rows := func(prefix string, n, ts int, spread bool) []fixtures.Click {
		var out []fixtures.Click
		for k := range n {
			at := ts
			if spread {
				at += k
			}
			out = append(out, fixtures.Click{User: strconv.Itoa(k), Time: ms(at), Page: prefix + strconv.Itoa(k)})
		}
		return out
	}
	pairs := func(l, r string, keys ...int) []string {
		var out []string
		for _, k := range keys {
			out = append(out, fmt.Sprintf("%d:%s%d+%s%d", k, l, k, r, k))
		}
		return out
	}
	step := func(name string, left, right []fixtures.Click, want []string) {
		t.Helper()
		h.add(left, right)
		h.check(name, want...)
	}
	step("A", rows("A", 2, 0, false), nil, nil)
	step("a", nil, rows("a", 2, 0, false), pairs("A", "a", 0, 1))
	step("B", rows("B", 4, 1000, true), nil, nil)
	step("b", nil, rows("b", 4, 1100, false), pairs("B", "b", 0, 1, 2, 3))
	step("c", nil, rows("c", 4, 1101, false), pairs("B", "c", 1, 2, 3))
	step("d", nil, rows("d", 4, 1102, false), pairs("B", "d", 2, 3))
	step("e", nil, rows("e", 4, 1103, false), pairs("B", "e", 3))
	step("f", nil, rows("f", 4, 1104, false), nil)
	step("g", nil, rows("g", 4, 899, false), nil)
	step("h", nil, rows("h", 4, 900, false), pairs("B", "h", 0))
	step("i", nil, rows("i", 4, 901, false), pairs("B", "i", 0, 1))
	step("j", nil, rows("j", 4, 902, false), pairs("B", "j", 0, 1, 2))
	step("k", nil, rows("k", 4, 903, false), pairs("B", "k", 0, 1, 2, 3))
	step("l", nil, rows("l", 4, 2000, true), nil)
	step("C", rows("C", 4, 2100, false), nil, pairs("C", "l", 0, 1, 2, 3))
	step("D", rows("D", 4, 2101, false), nil, pairs("D", "l", 1, 2, 3))
	step("E", rows("E", 4, 2102, false), nil, pairs("E", "l", 2, 3))
	step("F", rows("F", 4, 2103, false), nil, pairs("F", "l", 3))
	step("G", rows("G", 4, 2104, false), nil, nil)
	step("H", rows("H", 4, 1899, false), nil, nil)
	step("I", rows("I", 4, 1900, false), nil, pairs("I", "l", 0))
	step("J", rows("J", 4, 1901, false), nil, pairs("J", "l", 0, 1))
	step("K", rows("K", 4, 1902, false), nil, pairs("K", "l", 0, 1, 2))
	step("L", rows("L", 4, 1903, false), nil, pairs("L", "l", 0, 1, 2, 3))
}

// TestJoinOnWindowsRefused: a join on windows joins on tumbling or
// sliding windows; a key's own windows, or windows that share their
// start, are refused at Start, saying which.
func TestJoinOnWindowsRefused(t *testing.T) {
	for _, tc := range []struct {
		windows typed.Windows
		want    string
	}{
		{typed.Session(time.Minute), "JoinOnWindows: Session(1m0s) windows are a key's own: join on tumbling or sliding windows"},
		{typed.Cumulate(time.Minute, time.Hour), "JoinOnWindows: Cumulate(1m0s, 1h0m0s): windows that share their start are not joined on"},
	} {
		side := typed.GroupByKey(typed.WithWatermark(typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("clicks", 0)), clickTime, time.Minute),
			func(c *fixtures.Click) string { return c.User })
		join := typed.Join(side, side, typed.Inner, func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string { return j.Key },
			typed.JoinOnWindows(tc.windows), typed.JoinLeftTime(clickTime), typed.JoinRightTime(clickTime))
		q, err := typed.WriteTo(join, newSink[string]()).Start(t.Context())
		if err == nil {
			q.Stop()
			t.Fatalf("%v: started", tc.windows)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.windows, err, tc.want)
		}
	}
}

// TestJoinMatchFlagsAcrossTypes: a join keeps, for a side it writes
// padded, whether each stored row has had a match; an inner join keeps it
// for neither side (nothing reads it, and marking a row that matches
// after it was stored would write it again). A checkpoint whose stored
// side lacks it is refused by a join that writes that side padded, even
// with pipeline changes allowed: a row that matched would be written
// again, padded. A join that reads fewer flags than the one before may
// follow it, and writes what the stored flags say.
func TestJoinMatchFlagsAcrossTypes(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0).UTC() }
	// Left 1 is stored, then matched by right 2; left 3 and right 4
	// match nothing; right 50 moves the watermark past them all.
	rows := [][2][]fixtures.Click{
		{{{User: "a", Time: at(0), Page: "1"}, {User: "d", Time: at(1), Page: "3"}}, nil},
		{nil, {{User: "a", Time: at(2), Page: "2"}, {User: "b", Time: at(2), Page: "4"}}},
		{{{User: "c", Time: at(60), Page: "5"}}, {{User: "c", Time: at(60), Page: "50"}}},
	}
	cond := typed.TimeBetween(-4*time.Second, 4*time.Second)
	// (The streams go on from one run to the next, as the checkpoint's
	// offsets do.)
	run := func(ck *checkpoint, l, r *typed.MemoryStream[fixtures.Click], how typed.JoinType, batches [][2][]fixtures.Click, opts ...runtime.Option) ([]string, error) {
		joined := typed.Join(byKey(watermarked(typed.FromMemory(l), time.Second)), byKey(watermarked(typed.FromMemory(r), time.Second)), how,
			func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
				return tuple(of(j.Left, valueOf), of(j.Right, valueOf))
			}, typed.JoinWithin(cond))
		sink := newSink[string]()
		w := typed.WriteTo(joined, sink)
		for _, b := range batches {
			l.Add(b[0]...)
			r.Add(b[1]...)
			if err := runToEnd(t, w, ck.opts(opts...)...); err != nil {
				return nil, err
			}
		}
		return sortedRows(sink.rows()), nil
	}
	for _, tc := range []struct {
		was, now typed.JoinType
		refused  string // the side the error names, or "" when the start goes on
	}{
		{typed.Inner, typed.LeftOuter, "left"},
		{typed.Inner, typed.RightOuter, "right"},
		{typed.Inner, typed.LeftSemi, "left"},
		{typed.LeftOuter, typed.FullOuter, "right"},
		{typed.RightOuter, typed.FullOuter, "left"},
		{typed.FullOuter, typed.LeftOuter, ""},
		{typed.FullOuter, typed.RightOuter, ""},
		{typed.LeftOuter, typed.Inner, ""},
	} {
		t.Run(fmt.Sprintf("%v-then-%v", tc.was, tc.now), func(t *testing.T) {
			ck := newCheckpoint()
			l := typed.NewMemoryStream[fixtures.Click]("left", 0)
			r := typed.NewMemoryStream[fixtures.Click]("right", 0)
			if _, err := run(ck, l, r, tc.was, rows[:2]); err != nil {
				t.Fatal(err)
			}
			got, err := run(ck, l, r, tc.now, rows[2:], runtime.AllowPipelineChanges())
			if tc.refused != "" {
				want := fmt.Sprintf("the stored %s rows do not say whether they had a match", tc.refused)
				if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), want) {
					t.Fatalf("%v, want it refused, saying %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The loop: of the stored rows, only those that matched
			// nothing are written padded, by the join that follows.
			var want []string
			if tc.now == typed.LeftOuter || tc.now == typed.FullOuter {
				want = append(want, "(3,null)")
			}
			if tc.now == typed.RightOuter || tc.now == typed.FullOuter {
				want = append(want, "(null,4)")
			}
			want = append(want, "(5,50)")
			if want = sortedRows(want); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

// TestTimeConditionString: a condition reads as SQL would write it, each
// offset with its sign (inspect and the plan's description show it).
func TestTimeConditionString(t *testing.T) {
	for _, c := range []struct {
		cond typed.TimeCondition
		want string
	}{
		{typed.TimeBetween(-5*time.Second, 5*time.Second), "left >= right-5s AND left <= right+5s"},
		{typed.LeftAfter(0), "left > right"},
		{typed.LeftAtOrBefore(90 * time.Minute), "left <= right+1h30m0s"},
		{typed.LeftAtOrAfter(-time.Minute).And(typed.LeftBefore(0)), "left >= right-1m0s AND left < right"},
	} {
		if got := c.cond.String(); got != c.want {
			t.Errorf("%s, want %s", got, c.want)
		}
	}
}
