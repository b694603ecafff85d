package typed_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Kafka Streams' StreamTableJoinIntegrationTest, through the API: one key,
// a sequence of stream rows (L) and table updates (R), a record a batch,
// each with its timestamp in milliseconds; a stream row without a value
// is dropped (Kafka Streams' null value), a table update without one is a
// tombstone. The joiner writes "left-right".
type ksRecord struct {
	table bool
	value string // "": null
	ts    int
}

var ksSequence = []ksRecord{
	{false, "", 1}, {true, "", 2}, {false, "A", 3}, {true, "a", 4}, {false, "B", 5}, {true, "b", 6}, {false, "", 7}, {true, "", 8}, {false, "C", 9}, {true, "c", 10},
	{true, "", 11}, {false, "", 12}, {true, "", 13}, {true, "d", 7}, {false, "D", 6}, {false, "", 2}, {true, "", 3}, {true, "e", 14},
	{false, "E", 15}, {false, "", 10}, {true, "", 9}, {false, "F", 4}, {true, "f", 3},
}

func TestKafkaStreamsStreamTableJoin(t *testing.T) {
	base := time.Unix(1000, 0).UTC()
	for _, tc := range []struct {
		name      string
		how       typed.JoinType
		versioned bool
		want      []string
	}{
		{"inner", typed.Inner, false, []string{"B-a@5", "D-d@6", "E-e@15"}},
		{"left", typed.LeftOuter, false, []string{"A-null@3", "B-a@5", "C-null@9", "D-d@6", "E-e@15", "F-null@4"}},
		{"inner versioned", typed.Inner, true, []string{"B-a@5", "D-b@6", "E-e@15", "F-a@4"}},
		{"left versioned", typed.LeftOuter, true, []string{"A-null@3", "B-a@5", "C-null@9", "D-b@6", "E-e@15", "F-a@4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := typed.NewMemoryStream[fixtures.Click]("stream", 0)
			table := typed.NewMemoryStream[fixtures.Click]("table", 0)
			s, u := typed.FromMemory(stream), typed.FromMemory(table)
			var opts []typed.UpdatesOption
			if tc.versioned {
				s, u = watermarked(s, 0), watermarked(u, 0)
				opts = append(opts, typed.AsOf(0), typed.TableHistory(5*time.Minute))
			}
			joined := typed.JoinUpdates(byKey(s), typed.TableUpdates(u, func(c *fixtures.Click) string { return c.User }, func(c *fixtures.Click) bool { return c.Page == "" }),
				tc.how, func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
					right := "null"
					if j.Right != nil {
						right = j.Right.Page
					}
					return fmt.Sprintf("%s-%s@%d", j.Left.Page, right, j.Left.Time.Sub(base).Milliseconds())
				}, opts...)
			sink := newSink[string]()
			h := startLive(t, typed.WriteTo(joined, sink), runtime.NewManualClock(time.Unix(1_000_000, 0)), newCheckpoint().opts()...)
			defer h.stop()
			for _, r := range ksSequence {
				c := fixtures.Click{User: "k", Time: base.Add(time.Duration(r.ts) * time.Millisecond), Page: r.value}
				switch {
				case r.table:
					table.Add(c)
				case r.value != "":
					stream.Add(c)
				default:
					continue // a stream row without a value is dropped
				}
				h.clock.Advance(time.Second)
				h.wait()
			}
			if got := sink.rows(); !slices.Equal(got, tc.want) {
				t.Fatalf("rows %q, want %q", got, tc.want)
			}
		})
	}
}

// TestJoinUpdatesAgainstALoop: a stream joined with a table that another
// stream updates (with tombstones), in order of event time, writes what a
// plain loop writes (each stream row with the table's latest row at its
// time), Inner and LeftOuter, across a restart: the as-of join whatever
// the batches; the latest-row join when the batches read both inputs to
// the same time (with a cap of rows per batch, each input moves on its
// own, and the table's row "at that moment" is the one its batches have
// read).
func TestJoinUpdatesAgainstALoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	base := time.Unix(1000, 0).UTC()
	type event struct {
		table bool
		c     fixtures.Click
	}
	var events []event
	for i := range 400 {
		c := fixtures.Click{User: fmt.Sprint("k", rng.IntN(5)), Time: base.Add(time.Duration(i) * time.Second), Page: fmt.Sprint("v", i)}
		switch rng.IntN(5) {
		case 0:
			events = append(events, event{true, c})
		case 1:
			c.Page = "" // a tombstone
			events = append(events, event{true, c})
		default:
			events = append(events, event{false, c})
		}
	}
	text := func(s, v *fixtures.Click) string {
		if v == nil {
			return s.Page + "-null"
		}
		return s.Page + "-" + v.Page
	}
	want := map[typed.JoinType][]string{}
	latest := map[string]*fixtures.Click{}
	for i := range events {
		e := &events[i]
		switch {
		case e.table && e.c.Page == "":
			delete(latest, e.c.User)
		case e.table:
			latest[e.c.User] = &e.c
		default:
			v := latest[e.c.User]
			want[typed.LeftOuter] = append(want[typed.LeftOuter], text(&e.c, v))
			if v != nil {
				want[typed.Inner] = append(want[typed.Inner], text(&e.c, v))
			}
		}
	}
	for _, asOf := range []bool{false, true} {
		for _, how := range []typed.JoinType{typed.Inner, typed.LeftOuter} {
			for _, perBatch := range []int{1, 7, 0} {
				if !asOf && perBatch > 0 {
					continue
				}
				t.Run(fmt.Sprintf("asOf=%v/%v/rows-per-batch=%d", asOf, how, perBatch), func(t *testing.T) {
					stream := typed.NewMemoryStream[fixtures.Click]("stream", perBatch)
					table := typed.NewMemoryStream[fixtures.Click]("table", perBatch)
					s, u := watermarked(typed.FromMemory(stream), 0), watermarked(typed.FromMemory(table), 0)
					var opts []typed.UpdatesOption
					if asOf {
						opts = append(opts, typed.AsOf(0), typed.TableHistory(time.Hour))
					}
					joined := typed.JoinUpdates(byKey(s), typed.TableUpdates(u, func(c *fixtures.Click) string { return c.User }, func(c *fixtures.Click) bool { return c.Page == "" }),
						how, func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string { return text(j.Left, j.Right) }, opts...)
					sink := newSink[string]()
					w := typed.WriteTo(joined, sink)
					ck := newCheckpoint()
					for half, part := range [][]event{events[:len(events)/2], events[len(events)/2:]} {
						// Both inputs are read in one batch each time: the
						// halves keep the order of time across a restart.
						for _, e := range part {
							if e.table {
								table.Add(e.c)
							} else {
								stream.Add(e.c)
							}
						}
						if err := runToEnd(t, w, ck.opts()...); err != nil {
							t.Fatalf("half %d: %v", half, err)
						}
					}
					if got, want := sortedRows(sink.rows()), sortedRows(want[how]); !slices.Equal(got, want) {
						t.Fatalf("%d rows, want %d; first difference:\n%s", len(got), len(want), firstDifference(got, want))
					}
				})
			}
		}
	}
}

// TestJoinUpdatesAsOfGrace: with a grace, a stream row waits until the
// watermark is past its time plus the grace, so that a table update of an
// earlier time that comes after it still counts; without one, it joins
// with what has come.
func TestJoinUpdatesAsOfGrace(t *testing.T) {
	base := time.Unix(1000, 0).UTC()
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	for _, tc := range []struct {
		grace time.Duration
		want  []string
	}{
		{0, []string{"s1-v1", "s2-v3"}},
		{5 * time.Second, []string{"s1-v2", "s2-v3"}},
	} {
		t.Run(fmt.Sprint("grace=", tc.grace), func(t *testing.T) {
			stream := typed.NewMemoryStream[fixtures.Click]("stream", 0)
			table := typed.NewMemoryStream[fixtures.Click]("table", 0)
			s, u := watermarked(typed.FromMemory(stream), 0), watermarked(typed.FromMemory(table), 0)
			joined := typed.JoinUpdates(byKey(s), typed.TableUpdates(u, func(c *fixtures.Click) string { return c.User }, nil), typed.Inner,
				func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
					return j.Left.Page + "-" + j.Right.Page
				},
				typed.AsOf(tc.grace))
			sink := newSink[string]()
			w := typed.WriteTo(joined, sink)
			ck := newCheckpoint()
			step := func(more ...runtime.Option) {
				t.Helper()
				if err := runToEnd(t, w, ck.opts(more...)...); err != nil {
					t.Fatal(err)
				}
			}
			stream.Add(fixtures.Click{User: "k", Time: at(10), Page: "s1"})
			table.Add(fixtures.Click{User: "k", Time: at(5), Page: "v1"})
			step()
			table.Add(fixtures.Click{User: "k", Time: at(9), Page: "v2"})
			step()
			table.Add(fixtures.Click{User: "k", Time: at(20), Page: "v3"})
			stream.Add(fixtures.Click{User: "k", Time: at(20), Page: "s2"})
			step(runtime.FlushEventTime())
			if got := sink.rows(); !slices.Equal(got, tc.want) {
				t.Fatalf("rows %q, want %q", got, tc.want)
			}
		})
	}
}

// TestJoinUpdatesLateTableUpdate: without AsOf, a table update that comes
// after a later one, in the same batch or the next, replaces it all the
// same, as Kafka Streams applies a topic's updates in order: the stream
// row after them joins the last to come.
func TestJoinUpdatesLateTableUpdate(t *testing.T) {
	base := time.Unix(1000, 0).UTC()
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	for _, perBatch := range []int{0, 1} {
		t.Run(fmt.Sprint("rows-per-batch=", perBatch), func(t *testing.T) {
			stream := typed.NewMemoryStream[fixtures.Click]("stream", 0)
			table := typed.NewMemoryStream[fixtures.Click]("table", perBatch)
			s, u := watermarked(typed.FromMemory(stream), 0), watermarked(typed.FromMemory(table), 0)
			joined := typed.JoinUpdates(byKey(s), clickTable(u), typed.Inner,
				func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
					return j.Left.Page + "-" + j.Right.Page
				})
			sink := newSink[string]()
			w := typed.WriteTo(joined, sink)
			ck := newCheckpoint()
			table.Add(fixtures.Click{User: "k", Time: at(10), Page: "v2"}, fixtures.Click{User: "k", Time: at(5), Page: "v1"})
			if err := runToEnd(t, w, ck.opts()...); err != nil {
				t.Fatal(err)
			}
			stream.Add(fixtures.Click{User: "k", Time: at(20), Page: "s"})
			if err := runToEnd(t, w, ck.opts()...); err != nil {
				t.Fatal(err)
			}
			if got, want := sink.rows(), []string{"s-v1"}; !slices.Equal(got, want) {
				t.Fatalf("rows %q, want %q", got, want)
			}
		})
	}
}

// TestJoinUpdatesAsOfHeldRowKeepsItsVersion: a stream row held for its
// grace joins the version current at its time, though the batch that
// releases it brings a later update of its key, which drops the versions
// older than the one current at the watermark less the grace (as Kafka
// Streams' versioned table keeps what its grace may ask for).
func TestJoinUpdatesAsOfHeldRowKeepsItsVersion(t *testing.T) {
	base := time.Unix(1000, 0).UTC()
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	for _, laterUpdate := range []string{"other", "k"} {
		t.Run("later update of key "+laterUpdate, func(t *testing.T) {
			stream := typed.NewMemoryStream[fixtures.Click]("stream", 0)
			table := typed.NewMemoryStream[fixtures.Click]("table", 1) // a table update a batch
			s, u := watermarked(typed.FromMemory(stream), 0), watermarked(typed.FromMemory(table), 0)
			joined := typed.JoinUpdates(byKey(s), typed.TableUpdates(u, func(c *fixtures.Click) string { return c.User }, nil), typed.LeftOuter,
				func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
					if j.Right == nil {
						return j.Left.Page + "-null"
					}
					return j.Left.Page + "-" + j.Right.Page
				},
				typed.AsOf(10*time.Second))
			sink := newSink[string]()
			w := typed.WriteTo(joined, sink)
			ck := newCheckpoint()
			table.Add(fixtures.Click{User: "k", Time: at(10), Page: "v1"}, fixtures.Click{User: "k", Time: at(20), Page: "v2"})
			stream.Add(fixtures.Click{User: "k", Time: at(15), Page: "s"}) // held until the watermark reaches 25
			if err := runToEnd(t, w, ck.opts()...); err != nil {
				t.Fatal(err)
			}
			// The watermark jumps to 40; the batch it runs in brings a
			// table update at 41, of key k or of another key.
			stream.Add(fixtures.Click{User: "x", Time: at(40), Page: "x"})
			table.Add(fixtures.Click{User: "y", Time: at(40), Page: "y"}, fixtures.Click{User: laterUpdate, Time: at(41), Page: "v3"})
			if err := runToEnd(t, w, ck.opts(runtime.FlushEventTime())...); err != nil {
				t.Fatal(err)
			}
			if got, want := sortedRows(sink.rows()), []string{"s-v1", "x-null"}; !slices.Equal(got, want) {
				t.Fatalf("rows %q, want %q: the held row s@15 joins v1, the version at 15", got, want)
			}
		})
	}
}

// TestJoinUpdatesAsOfForgetsOldVersions: with AsOf, a key's versions that
// no stream row to come can join (older than the one current at the
// watermark less the grace and history) are dropped as the watermark
// passes them, though no later update of the key comes, and a deleted
// key's tombstone with them: the state holds what joins need, as without
// AsOf a tombstone removes its key.
func TestJoinUpdatesAsOfForgetsOldVersions(t *testing.T) {
	base := time.Unix(1000, 0).UTC()
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	for _, opts := range [][]typed.UpdatesOption{nil, {typed.AsOf(0)}, {typed.AsOf(5 * time.Second), typed.TableHistory(time.Minute)}} {
		t.Run(fmt.Sprintf("options=%d", len(opts)), func(t *testing.T) {
			stream := typed.NewMemoryStream[fixtures.Click]("stream", 0)
			table := typed.NewMemoryStream[fixtures.Click]("table", 0)
			s, u := watermarked(typed.FromMemory(stream), 0), watermarked(typed.FromMemory(table), 0)
			joined := typed.JoinUpdates(byKey(s), typed.TableUpdates(u, func(c *fixtures.Click) string { return c.User }, func(c *fixtures.Click) bool { return c.Page == "" }),
				typed.LeftOuter, func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string { return j.Left.Page }, opts...)
			w := typed.WriteTo(joined, newSink[string]())
			ck := newCheckpoint()
			run := func(more ...runtime.Option) int64 {
				t.Helper()
				q, err := w.Start(t.Context(), ck.opts(append(more, runtime.WithTrigger(runtime.AvailableNow()))...)...)
				if err != nil {
					t.Fatal(err)
				}
				if err := q.AwaitTermination(); err != nil {
					t.Fatal(err)
				}
				p := q.RecentProgress()
				return p[len(p)-1].StateOperators[0].NumRowsTotal
			}
			for i := range 100 { // 100 keys, each written and then deleted
				table.Add(fixtures.Click{User: fmt.Sprint("k", i), Time: at(i), Page: "v"})
				table.Add(fixtures.Click{User: fmt.Sprint("k", i), Time: at(i + 1), Page: ""})
			}
			stream.Add(fixtures.Click{User: "x", Time: at(200), Page: "s"})
			run()
			for step := 1; step <= 3; step++ { // the watermark moves hours past every version
				table.Add(fixtures.Click{User: "live", Time: at(1000 * step), Page: "v"})
				stream.Add(fixtures.Click{User: "x", Time: at(1000 * step), Page: "s"})
			}
			// Flushed: the stream rows held for a grace are joined.
			if n := run(runtime.FlushEventTime()); n != 1 {
				t.Fatalf("%d state rows once the watermark is past every deleted key's versions and the live key's older ones; want 1 (the live key's current version)", n)
			}
		})
	}
}

// TestJoinUpdatesAsOfLateUpdateAfterADeletion: with AsOf, a table update
// at or before the watermark less the grace and history is late, dropped
// and counted, as Kafka Streams' versioned table refuses a write older
// than its history: one older than a deletion whose tombstone is gone
// does not bring the key back.
func TestJoinUpdatesAsOfLateUpdateAfterADeletion(t *testing.T) {
	base := time.Unix(1000, 0).UTC()
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	stream := typed.NewMemoryStream[fixtures.Click]("stream", 0)
	table := typed.NewMemoryStream[fixtures.Click]("table", 0)
	s, u := watermarked(typed.FromMemory(stream), 0), watermarked(typed.FromMemory(table), 0)
	joined := typed.JoinUpdates(byKey(s), typed.TableUpdates(u, func(c *fixtures.Click) string { return c.User }, func(c *fixtures.Click) bool { return c.Page == "" }),
		typed.LeftOuter, func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
			if j.Right == nil {
				return j.Left.Page + "-null"
			}
			return j.Left.Page + "-" + j.Right.Page
		}, typed.AsOf(0))
	sink := newSink[string]()
	w := typed.WriteTo(joined, sink)
	ck := newCheckpoint()
	var dropped int64
	step := func() {
		t.Helper()
		_, progress, _ := runAvailableNow(t, w, ck, sink)
		for _, p := range progress {
			dropped += p.StateOperators[0].NumRowsDroppedByWatermark
		}
	}
	// The watermark is the least of the two inputs': each step moves both.
	table.Add(fixtures.Click{User: "k", Time: at(10), Page: "v1"}, fixtures.Click{User: "y", Time: at(100), Page: "y"})
	stream.Add(fixtures.Click{User: "x", Time: at(100), Page: "x"})
	step()                                                                                                             // the watermark moves to 100
	table.Add(fixtures.Click{User: "k", Time: at(120), Page: ""}, fixtures.Click{User: "y", Time: at(300), Page: "y"}) // k deleted at 120
	stream.Add(fixtures.Click{User: "x", Time: at(300), Page: "x"})
	step() // the watermark moves to 300
	table.Add(fixtures.Click{User: "y", Time: at(400), Page: "y"})
	stream.Add(fixtures.Click{User: "x", Time: at(400), Page: "x"})
	step()                                                          // rows late at 300: the tombstone goes
	table.Add(fixtures.Click{User: "k", Time: at(115), Page: "v0"}) // late: before the deletion
	step()
	stream.Add(fixtures.Click{User: "k", Time: at(500), Page: "s"})
	step()
	if got, want := sortedRows(sink.rows()), []string{"s-null", "x-null", "x-null", "x-null"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q: k was deleted at 120, after v0@115", got, want)
	}
	if dropped != 1 {
		t.Fatalf("%d rows dropped as late, want 1 (v0@115)", dropped)
	}
}

// TestJoinUpdatesGlobalTable: a table given without event time (as a
// kafka.App's Task.GlobalSource should be, for Kafka Streams' GlobalKTable)
// has its updates applied before the stream's rows in each batch, so a
// stream row sees every update the batch read, however old the row: a
// first batch that reads the whole table joins against all of it, as a
// GlobalKTable, loaded before any stream row, does. With event time on
// both, the inputs are merged by it instead, as a co-partitioned KTable's
// are: a stream row does not see the table's later updates.
func TestJoinUpdatesGlobalTable(t *testing.T) {
	base := time.Unix(1000, 0).UTC()
	for _, tc := range []struct {
		name       string
		tableTimed bool
		want       []string
	}{
		{"global", false, []string{"s1-y", "s2-z"}},
		{"co-partitioned", true, []string{"s1-x", "s2-null"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := typed.NewMemoryStream[fixtures.Click]("stream", 0)
			table := typed.NewMemoryStream[fixtures.Click]("table", 0)
			u := typed.FromMemory(table)
			if tc.tableTimed {
				u = watermarked(u, 0)
			}
			joined := typed.JoinUpdates(byKey(watermarked(typed.FromMemory(stream), 0)), clickTable(u), typed.LeftOuter,
				func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
					right := "null"
					if j.Right != nil {
						right = j.Right.Page
					}
					return j.Left.Page + "-" + right
				})
			at := func(user string, s int, page string) fixtures.Click {
				return fixtures.Click{User: user, Time: base.Add(time.Duration(s) * time.Second), Page: page}
			}
			table.Add(at("a", 10, "x"), at("a", 100, "y"), at("b", 100, "z"))
			stream.Add(at("a", 50, "s1"), at("b", 50, "s2"))
			sink := newSink[string]()
			if err := runToEnd(t, typed.WriteTo(joined, sink), newCheckpoint().opts()...); err != nil {
				t.Fatal(err)
			}
			got := sink.rows()
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("rows %q, want %q", got, tc.want)
			}
		})
	}
}
