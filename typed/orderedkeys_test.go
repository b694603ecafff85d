package typed_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// keyOfClick is a record key of every ordered kind: a string, a
// negative or positive integer, times, a bool.
func keyOfClick(c *fixtures.Click) fixtures.UserCount {
	return fixtures.UserCount{
		User: c.User, Count: c.Time.Unix()%7 - 3, First: c.Time.Truncate(time.Minute),
		Last: c.Time.Truncate(time.Hour).In(time.FixedZone("", 3600)), TimedOut: c.Page == "p1",
	}
}

func compareUserCounts(a, b fixtures.UserCount) int {
	return cmp.Or(strings.Compare(a.User, b.User), cmp.Compare(a.Count, b.Count), a.First.Compare(b.First),
		a.Last.Compare(b.Last), cmp.Compare(boolNumber(a.TimedOut), boolNumber(b.TimedOut)))
}

func boolNumber(v bool) int {
	if v {
		return 1
	}
	return 0
}

type keyRows struct {
	Key fixtures.UserCount
	N   int64
}

// countRows counts a key's rows.
func countRows(k fixtures.UserCount, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (keyRows, error) {
	c, _ := st.Get()
	for range rows {
		c.Count++
	}
	st.Update(c)
	return keyRows{k, c.Count}, nil
}

// countByRecordKey runs a count per keyOfClick over in, in chunks, each
// a query on ck that starts where the last stopped, with binary keys
// for the chunks binary says.
func countByRecordKey(t *testing.T, ck *checkpoint, in []fixtures.Click, chunks [][2]int, binary func(chunk int) bool) map[fixtures.UserCount]int64 {
	t.Helper()
	defer typed.WriteBinaryRecordKeys(false)
	got := map[fixtures.UserCount]int64{}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 64)
	for i, chunk := range chunks {
		typed.WriteBinaryRecordKeys(binary(i))
		byKey := typed.GroupByKey(typed.FromMemory(m), keyOfClick)
		count := typed.MapGroupsWithState(byKey, typed.NoTimeout,
			countRows)
		sink := newSink[keyRows]()
		m.Add(in[chunk[0]:chunk[1]]...)
		if err := runToEnd(t, typed.WriteTo(count, sink).OutputMode(typed.Update), ck.opts()...); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		for _, r := range sink.rows() {
			got[r.Key] = r.N // the latest count of each key
		}
	}
	return got
}

// storedCounts reads the counts back from the checkpoint, and each
// partition's keys in the order the store holds them, and its key type.
func storedCounts(t *testing.T, ck *checkpoint) (keys map[uint32][]fixtures.UserCount, counts map[fixtures.UserCount]int64, keyType string) {
	t.Helper()
	c, meta := openCheckpoint(t, ck.fs)
	defer c.Close()
	keys, counts = map[uint32][]fixtures.UserCount{}, map[fixtures.UserCount]int64{}
	err := c.Rows(meta, 0, "", func(r runtime.StateRow) error {
		var k fixtures.UserCount
		if err := json.Unmarshal(r.Key, &k); err != nil {
			return err
		}
		var c fixtures.Counter
		if err := json.Unmarshal(r.Value, &c); err != nil {
			return err
		}
		keys[r.Partition] = append(keys[r.Partition], k)
		counts[k] = c.Count
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys, counts, meta.Operators[0].KeyType
}

func loopCounts(in []fixtures.Click) map[fixtures.UserCount]int64 {
	want := map[fixtures.UserCount]int64{}
	for i := range in {
		want[keyOfClick(&in[i])]++
	}
	return want
}

// sameKeyCounts compares counts keyed by times (which == compares with their
// locations) by their JSON.
func sameKeyCounts(a, b map[fixtures.UserCount]int64) bool {
	norm := func(m map[fixtures.UserCount]int64) map[string]int64 {
		out := map[string]int64{}
		for k, n := range m {
			j, _ := json.Marshal(k)
			out[string(j)] += n
		}
		return out
	}
	return maps.Equal(norm(a), norm(b))
}

// TestRecordKeysSortByTheirFields: a record key's state is stored in the
// order of its fields (strings, negative numbers, times, bools) within
// each input partition and key length, each key once, with the count a loop finds,
// across restarts.
func TestRecordKeysSortByTheirFields(t *testing.T) {
	in := clicks(600, 21)
	ck := newCheckpoint()
	got := countByRecordKey(t, ck, in, [][2]int{{0, 100}, {100, 350}, {350, 600}}, func(int) bool { return false })
	want := loopCounts(in)
	if !sameKeyCounts(got, want) {
		t.Fatalf("counts:\n got %v\nwant %v", got, want)
	}
	keys, stored, keyType := storedCounts(t, ck)
	if keyType != "orderedRecord" {
		t.Errorf("key type %q, want orderedRecord", keyType)
	}
	n := 0
	for p, keys := range keys {
		n += len(keys)
		// State entries are prefixed by their key's length: keys of
		// one length sort as their fields.
		if !slices.IsSortedFunc(keys, func(a, b fixtures.UserCount) int {
			return cmp.Or(cmp.Compare(len(a.User), len(b.User)), compareUserCounts(a, b))
		}) {
			t.Errorf("partition %d: stored keys are not in the order of their fields: %v", p, keys)
		}
	}
	if !sameKeyCounts(stored, want) || n != len(want) {
		t.Errorf("%d stored keys in %d partitions, %d counted; stored:\n%v\nwant %v", n, len(keys), len(want), stored, want)
	}
}

// TestCheckpointOfBinaryRecordKeys: a checkpoint whose record keys an
// earlier version stored in their binary encoding goes on in that
// encoding: the counts carry on, and the checkpoint still says so.
func TestCheckpointOfBinaryRecordKeys(t *testing.T) {
	in := clicks(600, 22)
	ck := newCheckpoint()
	chunks := [][2]int{{0, 200}, {200, 400}, {400, 600}}
	got := countByRecordKey(t, ck, in, chunks, func(chunk int) bool { return chunk == 0 })
	if want := loopCounts(in); !sameKeyCounts(got, want) {
		t.Fatalf("counts:\n got %v\nwant %v", got, want)
	}
	_, stored, keyType := storedCounts(t, ck)
	if keyType != "record" {
		t.Errorf("key type %q, want record (the checkpoint's keys stay binary)", keyType)
	}
	if want := loopCounts(in); !sameKeyCounts(stored, want) {
		t.Errorf("stored counts:\n got %v\nwant %v", stored, want)
	}
}

// TestRecordKeyFieldsChanged: a record key whose fields changed addresses
// other entries: the checkpoint is refused, naming the fields.
func TestRecordKeyFieldsChanged(t *testing.T) {
	ck := newCheckpoint()
	countByRecordKey(t, ck, clicks(50, 23), [][2]int{{0, 50}}, func(int) bool { return false })
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	byPage := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) fixtures.PageKey { return fixtures.PageKey{User: c.User, Page: c.Page} })
	count := typed.MapGroupsWithState(byPage, typed.NoTimeout,
		func(k fixtures.PageKey, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (keyRows, error) {
			return keyRows{}, nil
		})
	err := runToEnd(t, typed.WriteTo(count, newSink[keyRows]()).OutputMode(typed.Update), ck.opts(runtime.AllowPipelineChanges())...)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "fields were (User string, Count int64, First time.Time, Last time.Time, TimedOut bool), are now (User string, Page string)") {
		t.Fatalf("a key of other fields: %v", err)
	}
}

// TestOnePipelineOnBothKeyEncodings: a pipeline started on a checkpoint
// of binary record keys, then on a new one, stores the new one's keys
// ordered; while it runs on the first, a start on the second is refused
// (both would share its key codec), and succeeds once it has stopped.
func TestOnePipelineOnBothKeyEncodings(t *testing.T) {
	in := clicks(300, 24)
	old := newCheckpoint()
	countByRecordKey(t, old, in, [][2]int{{0, 300}}, func(int) bool { return true })

	m := typed.NewMemoryStream[fixtures.Click]("clicks", 64)
	m.Add(in...)
	byKey := typed.GroupByKey(typed.FromMemory(m), keyOfClick)
	count := typed.MapGroupsWithState(byKey, typed.NoTimeout,
		countRows)
	w := typed.WriteTo(count, newSink[keyRows]()).OutputMode(typed.Update)

	running, err := w.Start(context.Background(), old.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	probe := keyOfClick(&in[0])
	checkPartitionKey(t, running, probe)
	fresh := newCheckpoint()
	if _, err := w.Start(context.Background(), fresh.opts()...); err == nil || !strings.Contains(err.Error(), "another query of this pipeline") {
		t.Fatalf("a start on ordered keys while the pipeline runs on binary ones: %v", err)
	}
	if err := running.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := runToEnd(t, w, fresh.opts()...); err != nil {
		t.Fatal(err)
	}
	again, err := w.Start(context.Background(), fresh.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	checkPartitionKey(t, again, probe)
	if err := again.Stop(); err != nil {
		t.Fatal(err)
	}
	want := loopCounts(in)
	for _, c := range []struct {
		name    string
		ck      *checkpoint
		keyType string
	}{{"the checkpoint of binary keys", old, "record"}, {"the new checkpoint", fresh, "orderedRecord"}} {
		keys, stored, keyType := storedCounts(t, c.ck)
		if keyType != c.keyType || !sameKeyCounts(stored, want) {
			t.Errorf("%s: key type %q (want %q), counts equal to the loop's: %v", c.name, keyType, c.keyType, sameKeyCounts(stored, want))
		}
		if c.keyType == "orderedRecord" {
			for p, keys := range keys {
				if !slices.IsSortedFunc(keys, func(a, b fixtures.UserCount) int {
					return cmp.Or(cmp.Compare(len(a.User), len(b.User)), compareUserCounts(a, b))
				}) {
					t.Errorf("%s, partition %d: keys out of order", c.name, p)
				}
			}
		}
	}
}

// checkPartitionKey: whichever encoding q's checkpoint stores k in, the
// key input is partitioned by is k's binary encoding, and so is the
// encoding that carries it to another checkpoint (TransferKey), which
// StoreKey turns back into the stored one.
func checkPartitionKey(t *testing.T, q *runtime.Query, k fixtures.UserCount) {
	t.Helper()
	text, _ := json.Marshal(k)
	part, err := q.PartitionKey("0", text)
	if err != nil {
		t.Fatal(err)
	}
	if bin, _ := k.MarshalBinary(); !bytes.Equal(part, bin) {
		t.Errorf("partition key %x, not the binary encoding %x", part, bin)
	}
	moved, err := q.TransferKey("0", text)
	if err != nil || !bytes.Equal(moved, part) {
		t.Errorf("transfer key %x, %v; want the binary encoding %x", moved, err, part)
	}
	stored, err := q.EncodeKey("0", text)
	if err != nil {
		t.Fatal(err)
	}
	err = q.ReadState(func(r *runtime.CheckpointReader) error {
		back, err := r.StoreKey("0", moved)
		if err == nil && !bytes.Equal(back, stored) {
			err = fmt.Errorf("StoreKey gave %x, not the stored key %x", back, stored)
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
}
