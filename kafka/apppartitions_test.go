package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/kafka"
)

// TestAppRefusesAddedPartitions: partitions added to the input move keys
// to other partitions, away from their state, as Kafka Streams refuses
// internal topics of another count. A running instance given one of the
// new partitions stops with an error that says so and names Reset; Run
// refuses to start while the changelog has the old count; after Reset
// the App runs on the new count and counts every click once more.
func TestAppRefusesAddedPartitions(t *testing.T) {
	conn, adm := newCountingCluster(t, 2)
	conn.ClientOptions = append(conn.ClientOptions, kgo.MetadataMaxAge(500*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	ctx := testContext(t)
	in := clicks(100, 3)
	produce(t, conn, clickRecords(t, "clicks", 2, in)...)
	watch := newAppWatch()
	opts := kafka.AppOptions{Group: "grow", Dir: t.TempDir()}
	app := newCountingApp(conn, opts, watch)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	watch.waitFor(t, "every click counted", func() bool { return watch.rows >= int64(len(in)) })
	if _, err := adm.CreatePartitions(ctx, 2, "clicks"); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("the App ran on after partitions were added (tasks %v)", app.Tasks())
	}
	if err == nil || !strings.Contains(err.Error(), "which had 2 partitions when it started") || !strings.Contains(err.Error(), "Reset the App") {
		t.Fatalf("Run after partitions were added: %v", err)
	}
	err = newCountingApp(conn, opts, newAppWatch()).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), `the changelog topic "grow-changelog" has 2 partitions and the input 4`) || !strings.Contains(err.Error(), "Reset the App") {
		t.Fatalf("a new Run on the old changelog: %v", err)
	}
	if err := newCountingApp(conn, opts, newAppWatch()).Reset(ctx); err != nil {
		t.Fatal(err)
	}
	watch = newAppWatch()
	running := runCountingApp(t, ctx, conn, opts, watch)
	watch.waitFor(t, "every click counted after the Reset", func() bool { return watch.rows >= int64(len(in)) })
	if n := running.app.Tasks(); len(n) != 4 {
		t.Errorf("after the Reset the instance runs tasks %v, want the 4 partitions'", n)
	}
	running.stop(t)
}
