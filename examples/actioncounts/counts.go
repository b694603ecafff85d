package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Event is one row of the events data set: an action at a time. A row
// without an action is refused (it goes to the dead letters) rather than
// counted under "".
//
//streamgen:record
type Event struct {
	Time   int64  `json:"time"` // Unix seconds
	Action string `json:"action" stream:"key"`
}

// ActionCount is an action's count of events so far: the output row.
//
//streamgen:record
type ActionCount struct {
	Action string `json:"action"`
	Count  int64  `json:"count"`
}

// countProcessor counts the events of each action in a value state: in
// each batch, for each action with new events, it adds them to the count
// and emits the new count (Update mode). The handlers of different
// actions may run at once (-concurrency); the processor keeps nothing of
// its own beyond the state variable, set in Init, so that is safe. The
// directive has streamgen write countProcessorStream, which groups the
// events by their key field (Action) and applies the processor.
//
//streamgen:processor mode=update
type countProcessor struct {
	count *typed.ValueState[int64]
}

func (p *countProcessor) Init(h *typed.Handle) error {
	p.count = typed.NewValueState[int64](h, "count")
	return nil
}

func (p *countProcessor) HandleInputRows(ctx context.Context, action string, events iter.Seq[Event], _ typed.TimerValues, emit func(ActionCount)) error {
	n, _, err := p.count.Get(ctx) // 0 for an action not seen before
	if err != nil {
		return err
	}
	for range events {
		n++
	}
	if err := p.count.Update(ctx, n); err != nil {
		return err
	}
	emit(ActionCount{Action: action, Count: n})
	return nil
}

// countPerAction groups the events by action and counts them.
func countPerAction(events typed.Stream[Event], concurrency int) typed.Stream[ActionCount] {
	return countProcessorStream(events, &countProcessor{}, typed.Concurrency(concurrency))
}

// finalCounts is the closing query over the output,
// SELECT action, MAX(count) AS count ... GROUP BY action ORDER BY action:
// the highest count written per action. Counts only grow, so a batch seen
// twice (written again after a failure) changes nothing. add runs on the
// query's goroutine and print after the query has ended, so they need no
// lock.
type finalCounts map[string]int64

func (f finalCounts) add(_ int64, rows []ActionCount) {
	for _, r := range rows {
		f[r.Action] = max(f[r.Action], r.Count)
	}
}

// print writes the counts as a table, as the console sink's.
func (f finalCounts) print(w io.Writer) error {
	if len(f) == 0 {
		_, err := fmt.Fprintln(w, "No event was counted in this run.")
		return err
	}
	actions := slices.Sorted(maps.Keys(f))
	actionWidth, countWidth := len("action"), len("count")
	for _, a := range actions {
		actionWidth = max(actionWidth, len(a))
		countWidth = max(countWidth, len(fmt.Sprint(f[a])))
	}
	rule := "+" + strings.Repeat("-", actionWidth) + "+" + strings.Repeat("-", countWidth) + "+\n"
	b := []byte("Final count per action (the highest count written in this run):\n" + rule)
	b = fmt.Appendf(b, "|%*s|%*s|\n", actionWidth, "action", countWidth, "count")
	b = append(b, rule...)
	for _, a := range actions {
		b = fmt.Appendf(b, "|%*s|%*d|\n", actionWidth, a, countWidth, f[a])
	}
	b = append(b, rule...)
	_, err := w.Write(b)
	return err
}
