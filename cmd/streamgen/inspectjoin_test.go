package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/joinrec"
	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestInspectJoin runs a left outer stream-stream join into a checkpoint
// and inspects it: the rows buffered on each side are listed with their
// event time, their values, as many as the query counted, and, for the
// left side (the side it writes padded), whether they have had a match
// (as a plain loop over the input says); the right side's rows do not
// say, as the join does not keep it.
func TestInspectJoin(t *testing.T) {
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) int64 { return base.Add(time.Duration(s) * time.Second).UnixNano() }
	lefts := []joinrec.Row{{Key: "a", Time: at(10), Value: 1}, {Key: "a", Time: at(40), Value: 2}, {Key: "b", Time: at(12), Value: 3}, {Key: "c", Time: at(50), Value: 4}, {Key: "d", Time: at(22), Value: 5}}
	// Two rows a side a batch: d@20 on the right waits two batches for
	// its match.
	rights := []joinrec.Row{{Key: "a", Time: at(13), Value: 10}, {Key: "d", Time: at(20), Value: 13}, {Key: "c", Time: at(52), Value: 12}, {Key: "b", Time: at(30), Value: 11}}
	const within = 5 * time.Second
	rowTime := func(r *joinrec.Row) time.Time { return time.Unix(0, r.Time) }
	key := func(r *joinrec.Row) string { return r.Key }
	l := typed.NewMemoryStream[joinrec.Row]("left", 2)
	r := typed.NewMemoryStream[joinrec.Row]("right", 2)
	l.Add(lefts...)
	r.Add(rights...)
	joined := typed.Join(
		typed.GroupByKey(typed.WithWatermark(typed.FromMemory(l), rowTime, time.Hour), key),
		typed.GroupByKey(typed.WithWatermark(typed.FromMemory(r), rowTime, time.Hour), key),
		typed.LeftOuter, func(j typed.Joined[string, joinrec.Row, joinrec.Row]) string { return j.Key },
		typed.JoinWithin(typed.TimeBetween(-within, within)))
	cp := filepath.Join(t.TempDir(), "checkpoint")
	q, err := typed.WriteTo(joined, typed.Sink[string](discard{})).
		Start(context.Background(), runtime.Checkpoint(cp), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}

	// What the buffers hold (a watermark an hour behind forgets nothing):
	// every row, and whether a row of the other side is within 5 s.
	want := map[string]bool{}
	matches := func(x joinrec.Row, others []joinrec.Row) bool {
		for _, o := range others {
			if o.Key == x.Key && x.Time-o.Time <= int64(within) && o.Time-x.Time <= int64(within) {
				return true
			}
		}
		return false
	}
	for _, x := range lefts {
		want[fmt.Sprintf("left %s %d %v", x.Key, x.Value, matches(x, rights))] = true
	}
	for _, x := range rights {
		want[fmt.Sprintf("right %s %d", x.Key, x.Value)] = true
	}

	listing, stderr, code := inspect(t, cp)
	if code != 0 || !strings.Contains(listing, "symmetricHashJoin") {
		t.Fatalf("inspect exited %d: %s\n%s", code, stderr, listing)
	}
	if !regexp.MustCompile(`index "byTime"\s+\d+ entries`).MatchString(listing) || strings.Contains(listing, `state "byTime"`) {
		t.Errorf("the listing does not tell the join's index of rows by time from its state:\n%s", listing)
	}
	// The condition with its offsets' signs, and each partition's
	// watermark with the time it last had data.
	if cond := "left >= right-5s AND left <= right+5s"; !strings.Contains(listing, cond) {
		t.Errorf("the listing does not say the condition %q:\n%s", cond, listing)
	}
	partitions := regexp.MustCompile(`(?m)^  partition \S+\s.*\(last active (.*)\)$`).FindAllStringSubmatch(listing, -1)
	if len(partitions) != 2 {
		t.Errorf("%d partitions' watermarks listed, want 2 (a side each):\n%s", len(partitions), listing)
	}
	for _, p := range partitions {
		if p[1] == "none" {
			t.Errorf("%s: the partition had data, and says it never had", p[0])
		}
	}
	text, stderr, code := inspect(t, cp, "state", "0", "--json")
	if code != 0 {
		t.Fatalf("inspect state exited %d: %s", code, stderr)
	}
	got := map[string]bool{}
	for line := range strings.Lines(text) {
		var row runtime.StateRow
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("row %q: %v", line, err)
		}
		if row.Variable != "left" && row.Variable != "right" {
			continue // the index of rows by the time they are forgotten
		}
		var k string
		var v joinrec.Row
		if err := json.Unmarshal(row.Key, &k); err != nil {
			t.Fatalf("key of %q: %v", line, err)
		}
		if err := json.Unmarshal(row.Value, &v); err != nil {
			t.Fatalf("value of %q: %v", line, err)
		}
		if row.EventTime == nil || row.EventTime.UnixNano() != v.Time {
			t.Fatalf("row %q: want its event time %v", line, time.Unix(0, v.Time).UTC())
		}
		if left := row.Variable == "left"; left != (row.Matched != nil) {
			t.Fatalf("row %q: says whether it matched: %v, want %v", line, row.Matched != nil, left)
		}
		if row.Matched == nil {
			got[fmt.Sprintf("%s %s %d", row.Variable, k, v.Value)] = true
		} else {
			got[fmt.Sprintf("%s %s %d %v", row.Variable, k, v.Value, *row.Matched)] = true
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("inspect lists the buffers as\n%v\nwant\n%v", got, want)
	}
	// As a table, each buffered row's entry is its event time and, on
	// the left, whether it matched.
	table, _, _ := inspect(t, cp, "state", "0")
	for _, x := range lefts {
		entry := time.Unix(0, x.Time).UTC().Format(time.RFC3339) + map[bool]string{true: " matched", false: " not matched"}[matches(x, rights)]
		if !regexp.MustCompile(`(?m)^"` + x.Key + `"\s+left\s+` + regexp.QuoteMeta(entry) + `\s`).MatchString(table) {
			t.Errorf("the table lacks left row %+v with entry %q:\n%s", x, entry, table)
		}
	}
}

// TestInspectCountsTimedState: the listing of DropDuplicatesWithEventTime
// counts the keys its state holds, not the event times (the state is in
// order of time), and of a join, tells the index of its rows by time
// from its sides' rows.
func TestInspectCountsTimedState(t *testing.T) {
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	for _, user := range []string{"ann", "bob", "cy", "dee"} {
		m.Add(fixtures.Click{User: user, Time: base})
	}
	m.Add(fixtures.Click{User: "ann", Time: base.Add(time.Second)}, fixtures.Click{User: "bob", Time: base.Add(time.Second)})
	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	deduped := typed.DropDuplicatesWithEventTime(typed.WithWatermark(typed.FromMemory(m), clickTime, time.Hour), func(c *fixtures.Click) string { return c.User })
	listing := runAndInspect(t, typed.WriteTo(deduped, typed.NewMemorySink[fixtures.Click]()))
	if !regexp.MustCompile(`state "[^"]+"\s+\w+, 4 keys, 6 entries`).MatchString(listing) {
		t.Errorf("the listing does not count 4 users' 6 times:\n%s", listing)
	}
}

// discard is a sink that keeps nothing.
type discard struct{}

func (discard) Write(context.Context, int64, []string) error { return nil }

// TestInspectAggregatorMeta: the listing of a TopN's operator says how
// many rows it keeps and the type of the rows it keeps encoded.
func TestInspectAggregatorMeta(t *testing.T) {
	in := typed.NewMemoryStream[joinrec.Row]("rows", 0)
	in.Add(joinrec.Row{Key: "a", Value: 1}, joinrec.Row{Key: "a", Value: 2}, joinrec.Row{Key: "b", Value: 3})
	keyed := typed.GroupByKey(typed.FromMemory(in), func(r *joinrec.Row) string { return r.Key })
	top := typed.AggregateByKey(keyed, typed.TopN(2, func(a, b *joinrec.Row) bool { return a.Value > b.Value }),
		func(key string, rows []joinrec.Row) string { return key })
	listing := runAndInspect(t, typed.WriteTo(top, typed.Sink[string](discard{})).OutputMode(typed.Update))
	for _, want := range []string{`\n  aggregator +keeps the 2 best rows\n`, `\n  kept rows +github.com/streamgen/streamgen/bench/joinrec.Row\{Key string`} {
		if !regexp.MustCompile(want).MatchString(listing) {
			t.Errorf("the listing lacks %s:\n%s", want, listing)
		}
	}
}
