package kafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// confluentRecords are clicks as a Confluent JSON Schema serializer
// writes them, built here by hand: a zero byte, the schema id big-endian,
// then the JSON that encoding/json writes for the click's fields.
func confluentRecords(t *testing.T, topic string, partitions int32, in []fixtures.Click, id int) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for _, c := range in {
		doc, err := json.Marshal(map[string]any{"user": c.User, "time": c.Time, "page": c.Page})
		if err != nil {
			t.Fatal(err)
		}
		value := append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, doc...)
		out = append(out, &kgo.Record{Topic: topic, Partition: userPartition(c.User, partitions), Key: []byte(c.User), Value: value})
	}
	return out
}

// TestConfluentJSONThroughKafka reads clicks in Confluent's wire format
// (a Confluent serializer's output, made by hand), counts them per user
// and writes the counts with the ConfluentJSON format, across a restart.
// It checks that the sink registered the row type's JSON Schema under
// the topic's subject, that every value carries its id and a payload the
// registered schema takes (an independent validator), that the counts
// are a plain loop's, and that values without the header are dead
// letters.
func TestConfluentJSONThroughKafka(t *testing.T) {
	ctx := testContext(t)
	conn, adm, registry := newRegistryCluster(t)
	createTopic(t, adm, "clicks", 3)
	createTopic(t, adm, "counts", 2)
	clickID, err := registry.RegisterSchema(ctx, "clicks-value", sr.Schema{Schema: (*fixtures.Click)(nil).StreamJSONSchema(), Type: sr.TypeJSON}, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	in := clicks(200, 7)
	records := confluentRecords(t, "clicks", 3, in, clickID)
	bad := []*kgo.Record{
		{Topic: "clicks", Partition: 0, Key: []byte("plain"), Value: records[0].Value[5:]}, // JSON without the header
		{Topic: "clicks", Partition: 1, Key: []byte("short"), Value: []byte{0, 0, 1}},
	}
	produce(t, conn, append(records, bad...)...)

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"clicks"}, StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 50})
	defer src.Close()
	sink := kafka.Sink[fixtures.UserCount](kafka.SinkOptions[fixtures.UserCount]{Connection: conn, Topic: "counts",
		Key: func(u *fixtures.UserCount) []byte { return []byte(u.User) }, Format: kafka.ConfluentJSON, Registry: registry})
	defer sink.Close()
	letters := &recordedLetters{byBatch: map[int64][]runtime.DeadLetter{}}
	pipeline := func() *typed.Writer[fixtures.UserCount] {
		byUser := typed.GroupByKey(kafka.FromConfluentJSON[fixtures.Click](src), func(c *fixtures.Click) string { return c.User })
		return typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks), sink)
	}
	ck := newCheckpoint()
	qctx, cancel := context.WithCancel(ctx)
	q, err := pipeline().Start(qctx, ck.opts(runtime.DeadLetters(letters), runtime.Listener(&stopAfter{n: 2, cancel: cancel}), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	cancel()
	runAvailableNow(t, pipeline(), ck, runtime.DeadLetters(letters))

	var all []runtime.DeadLetter
	for _, ls := range letters.byBatch {
		all = append(all, ls...)
	}
	if len(all) != len(bad) {
		t.Fatalf("%d dead letters, want %d: %+v", len(all), len(bad), all)
	}
	for _, l := range all {
		if !strings.Contains(l.Error, "Confluent's wire format") {
			t.Errorf("dead letter %q: error %q does not say what is wrong", l.Raw, l.Error)
		}
	}

	registered, err := registry.SchemaByVersion(ctx, "counts-value", -1)
	if err != nil {
		t.Fatalf("the sink registered no schema under counts-value: %v", err)
	}
	if registered.Type != sr.TypeJSON || registered.Schema.Schema != (*fixtures.UserCount)(nil).StreamJSONSchema() {
		t.Fatalf("counts-value holds a %v schema %s, want UserCount's JSON Schema", registered.Type, registered.Schema.Schema)
	}
	validator := compileSchema(t, registered.Schema.Schema)
	got := map[string]fixtures.UserCount{}
	for _, r := range consume(t, conn, adm, "counts") {
		if len(r.Value) < 5 || r.Value[0] != 0 || int(binary.BigEndian.Uint32(r.Value[1:5])) != registered.ID {
			t.Fatalf("value % x does not begin with a zero byte and schema id %d", r.Value[:min(len(r.Value), 5)], registered.ID)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Value[5:]))
		if err != nil {
			t.Fatal(err)
		}
		if err := validator.Validate(doc); err != nil {
			t.Fatalf("%s is not valid under the registered schema: %v", r.Value[5:], err)
		}
		var c struct {
			User        string
			Count       int64
			First, Last time.Time
		}
		if err := json.Unmarshal(r.Value[5:], &c); err != nil {
			t.Fatal(err)
		}
		got[c.User] = fixtures.UserCount{User: c.User, Count: c.Count, First: c.First, Last: c.Last}
	}
	sameCounts(t, got, expectedCounts(in))
}

// newRegistryCluster starts an embedded cluster with a schema registry,
// closed when the test ends.
func newRegistryCluster(t *testing.T) (kafka.Connection, *kadm.Client, *sr.Client) {
	t.Helper()
	cluster, err := kafka.Embedded(testContext(t), kafka.SchemaRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster.Connection(), newAdmin(t, cluster.Connection()), cluster.Registry()
}

func compileSchema(t *testing.T, text string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recordedLetters keeps the dead letters of a query by batch: a batch's
// letters given again replace those given before.
type recordedLetters struct {
	byBatch map[int64][]runtime.DeadLetter
}

func (r *recordedLetters) WriteDeadLetters(_ context.Context, batchID int64, letters []runtime.DeadLetter) error {
	r.byBatch[batchID] = letters
	return nil
}

// TestConfluentJSONSubjects: a sink writing to two topics registers the
// schema under each topic's subject (named by Subject when set); with
// LookUpSchema it registers nothing, fails a write to a subject without
// the schema, naming the subject, and writes once the schema is there.
func TestConfluentJSONSubjects(t *testing.T) {
	ctx := testContext(t)
	conn, adm, registry := newRegistryCluster(t)
	createTopic(t, adm, "a", 1)
	createTopic(t, adm, "b", 1)
	rows := []fixtures.Click{{User: "ann", Page: "a"}, {User: "bob", Page: "b"}, {User: "cy", Page: "a"}}
	sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Format: kafka.ConfluentJSON, Registry: registry,
		TopicOf: func(c *fixtures.Click) string { return c.Page },
		Subject: func(topic string) string { return "clicks." + topic }})
	defer sink.Close()
	if err := sink.Write(ctx, 0, rows); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"a", "b"} {
		ss, err := registry.SchemaByVersion(ctx, "clicks."+topic, -1)
		if err != nil {
			t.Fatalf("subject clicks.%s: %v", topic, err)
		}
		for _, r := range consume(t, conn, adm, topic) {
			if id, _, err := kafka.ConfluentPayload(r.Value); err != nil || int(id) != ss.ID {
				t.Errorf("topic %s: a value of schema id %d (%v), want %d", topic, id, err, ss.ID)
			}
		}
	}

	createTopic(t, adm, "c", 1)
	lookUp := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "c", Format: kafka.ConfluentJSON, Registry: registry, LookUpSchema: true})
	defer lookUp.Close()
	err := lookUp.Write(ctx, 0, rows)
	if err == nil || !strings.Contains(err.Error(), `subject "c-value"`) {
		t.Fatalf("a write to a subject without the schema: %v, want an error naming c-value", err)
	}
	if subjects, _ := registry.Subjects(ctx); len(subjects) != 2 {
		t.Fatalf("subjects %v: LookUpSchema registered one", subjects)
	}
	id, err := registry.RegisterSchema(ctx, "c-value", sr.Schema{Schema: (*fixtures.Click)(nil).StreamJSONSchema(), Type: sr.TypeJSON}, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := lookUp.Write(ctx, 1, rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range consume(t, conn, adm, "c") {
		if got, _, _ := kafka.ConfluentPayload(r.Value); int(got) != id {
			t.Errorf("schema id %d, want %d", got, id)
		}
	}
}

// TestConfluentJSONOptions: the ConfluentJSON format without a registry,
// and registry options without the format, fail every write saying so.
func TestConfluentJSONOptions(t *testing.T) {
	conn := kafka.Connection{Brokers: []string{"127.0.0.1:1"}}
	for _, tc := range []struct {
		opts kafka.SinkOptions[fixtures.Click]
		want string
	}{
		{kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "t", Format: kafka.ConfluentJSON}, "needs Registry"},
		{kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "t", LookUpSchema: true}, "are for Format ConfluentJSON"},
	} {
		sink := kafka.Sink[fixtures.Click](tc.opts)
		err := sink.Write(testContext(t), 0, []fixtures.Click{{User: "x"}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.opts, err, tc.want)
		}
		sink.Close()
	}
}

func TestConfluentPayload(t *testing.T) {
	value := kafka.AppendConfluentHeader(nil, 0x01020304)
	value = append(value, `{"a":1}`...)
	id, payload, err := kafka.ConfluentPayload(value)
	if err != nil || id != 0x01020304 || string(payload) != `{"a":1}` {
		t.Fatalf("ConfluentPayload(% x) = %d, %q, %v", value, id, payload, err)
	}
	for _, v := range [][]byte{nil, {0, 0, 0, 1}, []byte(`{"a":1}`), {1, 0, 0, 0, 1, '{', '}'}} {
		if _, _, err := kafka.ConfluentPayload(v); !errors.Is(err, kafka.ErrNoConfluentHeader) {
			t.Errorf("ConfluentPayload(% x): %v, want ErrNoConfluentHeader", v, err)
		}
	}
}
