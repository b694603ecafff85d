package kafka

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestOffsetsJSON checks Spark's form of the offsets, and that the same
// offsets always encode to the same bytes (the loop compares offsets as
// bytes to tell whether a batch has data).
func TestOffsetsJSON(t *testing.T) {
	o := offsets{{"b", 10}: 7, {"a", 0}: 123, {"a", 2}: 45, {"b", 9}: 0}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":{"0":123,"2":45},"b":{"10":7,"9":0}}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	back, err := decodeOffsets(b)
	if err != nil || fmt.Sprint(back) != fmt.Sprint(o) {
		t.Fatalf("read back %v, %v", back, err)
	}
	for _, bad := range []string{`{"a":{"x":1}}`, `{"a":{"-1":1}}`, `{"a":{"0":-5}}`, `[1]`} {
		if _, err := decodeOffsets(json.RawMessage(bad)); err == nil {
			t.Errorf("%s read without error", bad)
		}
	}
	if o, err := decodeOffsets(nil); o != nil || err != nil {
		t.Errorf("nil: %v %v", o, err)
	}
}

func TestParsePosition(t *testing.T) {
	tp, off, ok := parsePosition("my.topic-1/12@345")
	if !ok || tp != (topicPartition{"my.topic-1", 12}) || off != 345 {
		t.Fatalf("got %v %d %v", tp, off, ok)
	}
	for _, bad := range []string{"file.jsonl:3", "t/1", "t@1/2", "/1@2", "t/x@1", "t/1@-2"} {
		if _, _, ok := parsePosition(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestRateLimit checks the split against cases worked by hand.
func TestRateLimit(t *testing.T) {
	a, b, c := topicPartition{"t", 0}, topicPartition{"t", 1}, topicPartition{"t", 2}
	for _, tc := range []struct {
		limit       int64
		from, until offsets
		want        offsets
	}{
		// Spark's suite: lags 101, 11 and 1 under a limit of 10.
		{10, offsets{a: 0, b: 0, c: 0}, offsets{a: 101, b: 11, c: 1}, offsets{a: 8, b: 1, c: 1}},
		// Under the limit: everything.
		{100, offsets{a: 5, b: 0}, offsets{a: 50, b: 10}, offsets{a: 50, b: 10}},
		// A partition without lag keeps its end; shares floor.
		{9, offsets{a: 0, b: 7, c: 0}, offsets{a: 20, b: 7, c: 10}, offsets{a: 6, b: 7, c: 3}},
		// A small share rounds up to one: the total may pass the limit.
		{2, offsets{a: 0, b: 0, c: 0}, offsets{a: 1000, b: 1, c: 1}, offsets{a: 1, b: 1, c: 1}},
	} {
		if got := rateLimit(tc.limit, tc.from, tc.until); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("limit %d from %v until %v: got %v, want %v", tc.limit, tc.from, tc.until, got, tc.want)
		}
	}
}
