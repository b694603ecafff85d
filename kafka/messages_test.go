package kafka_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// header returns the value of the header key, and whether there is one.
func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestDeadLetterTopic sends records that do not decode (not JSON, and a
// click without its required time), and one that the decoder of From
// refuses, to a dead-letter topic, and checks that each dead letter
// carries the original key, value and headers, the error, the source and
// the position, while the good records go through.
func TestDeadLetterTopic(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "events", 2)
	createTopic(t, adm, "dlq", 1)
	good := clicks(6, 3)
	records := clickRecords(t, "events", 2, good)
	bad := []*kgo.Record{
		{Topic: "events", Partition: 0, Key: []byte("k-not-json"), Value: []byte("not json at all"),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t-1")}}},
		{Topic: "events", Partition: 1, Key: []byte("k-no-time"), Value: []byte(`{"user":"ann","page":"p1"}`),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t-2")}, {Key: "poison", Value: []byte("yes")}}},
		{Topic: "events", Partition: 1, Key: []byte("k-poison"), Value: records[0].Value,
			Headers: []kgo.RecordHeader{{Key: "poison", Value: []byte("yes")}}},
		// A tombstone's letter is a tombstone; a value of no bytes, one
		// of no bytes.
		{Topic: "events", Partition: 0, Key: []byte("k-tombstone")},
		{Topic: "events", Partition: 1, Key: []byte("k-empty"), Value: []byte{}},
	}
	produce(t, conn, append(records, bad...)...)

	for _, how := range []string{"typed.From", "kafka.From"} {
		t.Run(how, func(t *testing.T) {
			src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"events"}, StartingOffsets: kafka.Earliest(), Name: "events-" + how})
			defer src.Close()
			dlq := kafka.DeadLetterTopic("dlq", kafka.DeadLetterOptions{Connection: conn, Originals: []*kafka.TopicSource{src}, WriterID: how})
			defer dlq.Close()
			var stream typed.Stream[fixtures.Click]
			wantBad, wantGood := slices.Concat(bad[:2], bad[3:]), len(good)+1 // the poisoned record is a good click
			if how == "typed.From" {
				stream = typed.From[fixtures.Click](src)
			} else {
				// The decoder refuses records with a "poison" header,
				// which the record without a time has too: its error
				// is the decoder's.
				stream = kafka.From(src, func(m *kafka.Message) (fixtures.Click, error) {
					var c fixtures.Click
					for _, h := range m.Headers {
						if h.Key == "poison" {
							return c, errors.New("poisoned")
						}
					}
					err := c.UnmarshalJSON(m.Value)
					return c, err
				})
				wantBad, wantGood = bad, len(good)
			}
			sink := typed.NewMemorySink[fixtures.Click]()
			q := runAvailableNow(t, typed.WriteTo(stream, sink), newCheckpoint(), runtime.DeadLetters(dlq))
			if got := len(sink.Rows()); got != wantGood {
				t.Errorf("%d good rows, want %d", got, wantGood)
			}
			var letters int64
			for _, p := range q.RecentProgress() {
				letters += p.NumDeadLetters
			}
			if letters != int64(len(wantBad)) {
				t.Errorf("%d dead letters counted, want %d", letters, len(wantBad))
			}

			var got []*kgo.Record
			for _, r := range consume(t, conn, adm, "dlq") {
				if mark, ok := kafka.ReadBatchMark(r.Headers); ok && mark.Writer == how {
					got = append(got, r)
				}
			}
			if len(got) != len(wantBad) {
				t.Fatalf("%d records in the dead-letter topic, want %d", len(got), len(wantBad))
			}
			for _, b := range wantBad {
				i := slices.IndexFunc(got, func(r *kgo.Record) bool { return string(r.Key) == string(b.Key) })
				if i < 0 {
					t.Fatalf("no dead letter with key %q", b.Key)
				}
				r := got[i]
				if string(r.Value) != string(b.Value) || (r.Value == nil) != (b.Value == nil) {
					t.Errorf("%s: value %q (nil: %t), want %q (nil: %t)", b.Key, r.Value, r.Value == nil, b.Value, b.Value == nil)
				}
				for _, h := range b.Headers {
					if v, ok := header(r, h.Key); !ok || v != string(h.Value) {
						t.Errorf("%s: header %s is %q, want %q", b.Key, h.Key, v, h.Value)
					}
				}
				if v, _ := header(r, kafka.HeaderSource); v != src.Name() {
					t.Errorf("%s: source %q", b.Key, v)
				}
				if v, _ := header(r, kafka.HeaderPosition); v != fmt.Sprintf("events/%d@%d", b.Partition, b.Offset) {
					t.Errorf("%s: position %q, want events/%d@%d", b.Key, v, b.Partition, b.Offset)
				}
				wantError := "invalid character"
				switch {
				case len(b.Value) == 0:
					wantError = "" // the decoder's, whatever it says
				case string(b.Key) == "k-no-time" && how == "typed.From":
					wantError = "time"
				case string(b.Key) != "k-not-json" && how == "kafka.From":
					wantError = "kafka.From: decode: poisoned"
				}
				if v, _ := header(r, kafka.HeaderError); !strings.Contains(v, wantError) {
					t.Errorf("%s: error %q, want it to say %q", b.Key, v, wantError)
				}
			}
		})
	}
}

// TestEventTimeWatermarkPerPartition takes the event time from the Kafka
// timestamp (through From's decoder) and checks that the query's
// watermark is the minimum over the Kafka partitions: one partition at
// +100s and one at +10s make a watermark of +10s, not +100s.
func TestEventTimeWatermarkPerPartition(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "times", 2)
	base := time.Unix(1_700_000_000, 0).UTC()
	record := func(p int32, seconds int) *kgo.Record {
		// The value's own time is wrong on purpose: the timestamp wins.
		c := fixtures.Click{User: fmt.Sprint("u", p), Time: time.Unix(0, 0).UTC(), Page: "x"}
		value, _ := c.MarshalJSON()
		return &kgo.Record{Topic: "times", Partition: p, Value: value, Timestamp: base.Add(time.Duration(seconds) * time.Second)}
	}
	produce(t, conn, record(0, 90), record(0, 100), record(1, 10), record(1, 5))
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"times"}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	pipeline := func(sink typed.Sink[fixtures.Click]) *typed.Writer[fixtures.Click] {
		events := kafka.From(src, func(m *kafka.Message) (fixtures.Click, error) {
			var c fixtures.Click
			err := c.UnmarshalJSON(m.Value)
			c.Time = m.Timestamp
			return c, err
		})
		return typed.WriteTo(typed.WithWatermark(events, func(c *fixtures.Click) time.Time { return c.Time }, 0), sink)
	}
	ck := newCheckpoint()
	first := typed.NewMemorySink[fixtures.Click]()
	runAvailableNow(t, pipeline(first), ck)
	for _, c := range first.Rows() {
		if c.Time.Before(base) {
			t.Fatalf("row %+v has the value's time, not the record's timestamp", c)
		}
	}
	produce(t, conn, record(0, 50), record(1, 1))
	q := runAvailableNow(t, pipeline(typed.NewMemorySink[fixtures.Click]()), ck)
	p, _ := q.LastProgress()
	if got, want := p.EventTime["watermark"], base.Add(10*time.Second).Format(time.RFC3339Nano); got != want {
		t.Fatalf("watermark %q, want %q (the slower partition's)", got, want)
	}
}

// TestSinkTopicsKeysHeadersBinary writes rows to a topic chosen per row,
// with keys, headers and timestamps (the rows' event times, years back),
// in the binary format, and reads them back.
func TestSinkTopicsKeysHeadersBinary(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "out-a", 2)
	createTopic(t, adm, "out-b", 1)
	rows := clicks(40, 4)
	sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{
		Connection: conn,
		TopicOf: func(c *fixtures.Click) string {
			if c.User < "d" {
				return "out-a"
			}
			return "out-b"
		},
		Key:       func(c *fixtures.Click) []byte { return []byte(c.User) },
		Headers:   func(c *fixtures.Click) []kafka.Header { return []kafka.Header{{Key: "page", Value: []byte(c.Page)}} },
		Timestamp: func(c *fixtures.Click) time.Time { return c.Time },
		Format:    kafka.Binary,
	})
	defer sink.Close()
	if err := sink.Write(testContext(t), 7, rows); err != nil {
		t.Fatal(err)
	}
	var got []fixtures.Click
	for _, topic := range []string{"out-a", "out-b"} {
		for _, r := range consume(t, conn, adm, topic) {
			var c fixtures.Click
			if err := c.UnmarshalBinary(r.Value); err != nil {
				t.Fatal(err)
			}
			if (c.User < "d") != (topic == "out-a") || string(r.Key) != c.User {
				t.Errorf("%+v in %s with key %q", c, topic, r.Key)
			}
			if page, _ := header(r, "page"); page != c.Page {
				t.Errorf("%+v: page header %q", c, page)
			}
			if !r.Timestamp.Equal(c.Time) {
				t.Errorf("%+v: timestamp %v, want the row's time", c, r.Timestamp)
			}
			mark, ok := kafka.ReadBatchMark(r.Headers)
			if !ok || mark.Batch != 7 || mark.Rows != len(rows) || mark.Row >= len(rows) || rows[mark.Row] != c {
				t.Errorf("%+v: mark %+v", c, mark)
			}
			got = append(got, c)
		}
	}
	if len(got) != len(rows) {
		t.Fatalf("read %d rows, want %d", len(got), len(rows))
	}
	if err := sink.Write(testContext(t), 8, []fixtures.Click{{User: "x"}}); err != nil {
		t.Fatal(err)
	}
	bad := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, TopicOf: func(*fixtures.Click) string { return "" }})
	defer bad.Close()
	if err := bad.Write(testContext(t), 0, rows[:1]); err == nil || !strings.Contains(err.Error(), "row 0: TopicOf gave \"\"") {
		t.Errorf("an empty topic: %v", err)
	}
}

// TestFromKeepsWhatJSONLeavesOut: the rows decode makes go on as they
// are, so a field JSON leaves out (tagged json:"-"), here set from the
// message's key, reaches the sink.
func TestFromKeepsWhatJSONLeavesOut(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "tagged", 1)
	produce(t, conn, &kgo.Record{Topic: "tagged", Key: []byte("k1"), Value: []byte("v1")}, &kgo.Record{Topic: "tagged", Key: []byte("k2"), Value: []byte("v2")})
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"tagged"}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	rows := kafka.From(src, func(m *kafka.Message) (fixtures.Tagged, error) {
		return fixtures.Tagged{Renamed: string(m.Value), Omitted: string(m.Key)}, nil
	})
	sink := typed.NewMemorySink[fixtures.Tagged]()
	runAvailableNow(t, typed.WriteTo(rows, sink), newCheckpoint())
	var got []string
	for _, r := range sink.Rows() {
		got = append(got, r.Renamed+"="+r.Omitted)
	}
	if want := []string{"v1=k1", "v2=k2"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
}

// TestDeadLetterTopicManyOriginals: a flood of bad records, in runs
// between good ones on two partitions and one far beyond the rest, each
// reaches the dead-letter topic with its own key and headers (the writer
// reads the originals back a run of offsets at a time).
func TestDeadLetterTopicManyOriginals(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "flood", 2)
	createTopic(t, adm, "dlq", 1)
	good := clickRecords(t, "flood", 2, clicks(40, 5))
	var records []*kgo.Record
	var bad []*kgo.Record
	for i := range 300 {
		if i%10 == 0 && len(good) > 0 {
			records = append(records, good[0])
			good = good[1:]
		}
		b := &kgo.Record{Topic: "flood", Partition: int32(i % 2), Key: fmt.Appendf(nil, "bad-%d", i), Value: []byte("not json"),
			Headers: []kgo.RecordHeader{{Key: "n", Value: fmt.Appendf(nil, "%d", i)}}}
		records = append(records, b)
		bad = append(bad, b)
	}
	// Far beyond the run of the others on partition 0.
	for range 3000 {
		records = append(records, &kgo.Record{Topic: "flood", Partition: 0, Value: []byte(`{"user":"u","time":"2026-01-01T00:00:00Z"}`)})
	}
	far := &kgo.Record{Topic: "flood", Partition: 0, Key: []byte("bad-far"), Value: []byte("not json"),
		Headers: []kgo.RecordHeader{{Key: "n", Value: []byte("far")}}}
	records = append(records, far)
	bad = append(bad, far)
	produce(t, conn, records...)

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"flood"}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	dlq := kafka.DeadLetterTopic("dlq", kafka.DeadLetterOptions{Connection: conn, Originals: []*kafka.TopicSource{src}})
	defer dlq.Close()
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.Click](src), typed.NewMemorySink[fixtures.Click]()), newCheckpoint(), runtime.DeadLetters(dlq))

	got := map[string]*kgo.Record{}
	for _, r := range consume(t, conn, adm, "dlq") {
		got[string(r.Key)] = r
	}
	if len(got) != len(bad) {
		t.Fatalf("%d dead letters with distinct keys, want %d", len(got), len(bad))
	}
	for _, b := range bad {
		r, ok := got[string(b.Key)]
		if !ok {
			t.Fatalf("no dead letter with key %q", b.Key)
		}
		if v, ok := header(r, "n"); !ok || v != string(b.Headers[0].Value) {
			t.Errorf("%s: header n is %q, want %q", b.Key, v, b.Headers[0].Value)
		}
	}
}

// TestSinkDeadLettersWhatItsTopicRefuses: rows whose records their topic
// refuses (larger than its max.message.bytes, or without a key for a
// compacted topic) go to the query's dead-letter sink with their value,
// and the batch's other rows are written, numbered without them; with
// transactions too, where a refused produce would abort the batch. A
// query without a dead-letter sink fails, naming the row and why.
func TestSinkDeadLettersWhatItsTopicRefuses(t *testing.T) {
	for _, tc := range []struct {
		exactlyOnce bool
		// limit is where the 2000 bytes that "small" takes are set: the
		// topic's max.message.bytes (the sink then caps the producer's
		// batches of it, which would otherwise hold several rows past
		// the limit), or the producer's batch size.
		limit string
	}{{false, "topic"}, {true, "topic"}, {false, "producer"}, {true, "producer"}} {
		t.Run(fmt.Sprintf("exactlyOnce=%v/limit=%s", tc.exactlyOnce, tc.limit), func(t *testing.T) {
			conn, adm := newCluster(t)
			ctx := testContext(t)
			small, compact := "2000", "compact"
			cfgs := map[string]map[string]*string{"small": nil, "keyed": {"cleanup.policy": &compact}}
			if tc.limit == "topic" {
				cfgs["small"] = map[string]*string{"max.message.bytes": &small}
				conn.ClientOptions = append(conn.ClientOptions, kgo.ProducerBatchCompression(kgo.NoCompression())) // the broker counts the whole
			} else {
				conn.ClientOptions = append(conn.ClientOptions, kgo.ProducerBatchMaxBytesFn(func(topic string) int32 {
					if topic == "small" {
						return 2000
					}
					return 1_000_000
				}))
			}
			for topic, cfg := range cfgs {
				if _, err := adm.CreateTopic(ctx, 1, 1, cfg, topic); err != nil {
					t.Fatal(err)
				}
			}
			in := clicks(30, 9)
			for i := range in {
				if i%7 == 3 {
					in[i].Page = strings.Repeat("p", 3000) // too large for "small"
				}
			}
			// Rows of users before "c" go to the compacted topic, and
			// those of "ann" have no key.
			topicOf := func(c *fixtures.Click) string {
				if c.User < "c" {
					return "keyed"
				}
				return "small"
			}
			refused := func(c fixtures.Click) bool { return c.User == "ann" || topicOf(&c) == "small" && len(c.Page) > 2000 }
			first := slices.IndexFunc(in, refused)
			run := func(letters runtime.DeadLetterSink) error {
				var eos *kafka.Transactions
				opts := newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()))
				if tc.exactlyOnce {
					eos = kafka.ExactlyOnce(kafka.ChangelogOptions{Connection: conn, Topic: "refused-changelog"})
					defer eos.Close()
					opts = append(opts, eos.Option())
				}
				if letters != nil {
					opts = append(opts, runtime.DeadLetters(letters))
				}
				sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, TopicOf: topicOf, Transactions: eos,
					Key: func(c *fixtures.Click) []byte {
						if c.User == "ann" {
							return nil
						}
						return []byte(c.User)
					}})
				defer sink.Close()
				stream := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
				stream.Add(in...)
				q, err := typed.WriteTo(typed.FromMemory(stream), sink).Start(ctx, opts...)
				if err != nil {
					return err
				}
				return q.AwaitTermination()
			}
			err := run(nil)
			if why := fmt.Sprintf("row %d: a record ", first); err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "runtime.DeadLetters") {
				t.Fatalf("without a dead-letter sink: %v, want a failure naming row %d", err, first)
			}
			letters := runtime.DeadLetterMemory()
			if err := run(letters); err != nil {
				t.Fatal(err)
			}
			var wantLetters, wantRows []string
			for _, c := range in {
				v, err := c.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				if refused(c) {
					wantLetters = append(wantLetters, string(v))
				} else {
					wantRows = append(wantRows, string(v))
				}
			}
			var gotLetters []string
			for _, l := range letters.Letters() {
				if l.Source != "kafka:(by row)" || !strings.HasPrefix(l.Position, "batch 0 row ") {
					t.Errorf("letter from %q at %q", l.Source, l.Position)
				}
				gotLetters = append(gotLetters, l.Raw)
			}
			var gotRows []string
			marks := map[int]bool{}
			for _, topic := range []string{"keyed", "small"} {
				for _, r := range consume(t, conn, adm, topic) {
					gotRows = append(gotRows, string(r.Value))
					mark, ok := kafka.ReadBatchMark(r.Headers)
					if !ok || mark.Rows != len(wantRows) || marks[mark.Row] {
						t.Errorf("record %s: mark %+v, want one of rows 0 to %d, each once", r.Value, mark, len(wantRows)-1)
					}
					marks[mark.Row] = true
				}
			}
			slices.Sort(gotLetters)
			slices.Sort(wantLetters)
			slices.Sort(gotRows)
			slices.Sort(wantRows)
			if !slices.Equal(gotLetters, wantLetters) {
				t.Errorf("dead letters %d, want %d: %q", len(gotLetters), len(wantLetters), gotLetters)
			}
			if !slices.Equal(gotRows, wantRows) {
				t.Errorf("records %d, want %d", len(gotRows), len(wantRows))
			}
		})
	}
}

// TestDeadLetterTopicFitsWhatASinkRefused: rows too large for their sink's
// topic go to a dead-letter topic with the same limit; there each letter
// is cut to fit, its whole length in HeaderTruncated, rather than refused
// in turn (which failed the batch), and keeps the key and headers the
// sink gave its row, so that it can be sent back where it belongs.
func TestDeadLetterTopicFitsWhatASinkRefused(t *testing.T) {
	conn, adm := newCluster(t)
	ctx := testContext(t)
	limit := "2000"
	for _, topic := range []string{"small", "letters"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &limit}, topic); err != nil {
			t.Fatal(err)
		}
	}
	conn.ClientOptions = append(conn.ClientOptions, kgo.ProducerBatchCompression(kgo.NoCompression())) // the broker counts the whole
	in := clicks(12, 5)
	for i := range in {
		if i%4 == 1 {
			in[i].Page = strings.Repeat("p", 1900+100*i) // too large for "small", and for "letters" with the headers
		}
	}
	letters := kafka.DeadLetterTopic("letters", kafka.DeadLetterOptions{Connection: conn})
	defer letters.Close()
	sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "small",
		Key: func(c *fixtures.Click) []byte { return []byte(c.User) },
		Headers: func(c *fixtures.Click) []kafka.Header {
			return []kafka.Header{{Key: "trace", Value: []byte(c.Page[:2])}}
		}})
	defer sink.Close()
	stream := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	stream.Add(in...)
	q, err := typed.WriteTo(typed.FromMemory(stream), sink).Start(ctx, newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()), runtime.DeadLetters(letters))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	var want, keys []string
	for _, c := range in {
		if len(c.Page) > 1000 {
			v, err := c.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			want, keys = append(want, string(v)), append(keys, c.User)
		}
	}
	got := consume(t, conn, adm, "letters")
	if len(got) != len(want) {
		t.Fatalf("%d dead letters, want %d", len(got), len(want))
	}
	for i, r := range got {
		whole, cut := header(r, kafka.HeaderTruncated)
		if !cut || whole != strconv.Itoa(len(want[i])) || !strings.HasPrefix(want[i], string(r.Value)) || len(r.Value) >= len(want[i]) {
			t.Errorf("letter %d: %d bytes, truncated %q (%v), want a beginning of the %d bytes of the row", i, len(r.Value), whole, cut, len(want[i]))
		}
		if trace, ok := header(r, "trace"); string(r.Key) != keys[i] || !ok || trace != "pp" {
			t.Errorf("letter %d: key %q, trace header %q (%v); want the row's key %q and its header", i, r.Key, trace, ok, keys[i])
		}
	}
	if rows := consume(t, conn, adm, "small"); len(rows) != len(in)-len(want) {
		t.Errorf("%d records in the sink's topic, want %d", len(rows), len(in)-len(want))
	}
}
