package kafka_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/typed"
)

// TestWithKcat checks the embedded broker and the source and sink against
// a real Kafka client, kcat (librdkafka): kcat produces clicks into the
// embedded broker on a loopback listener, a query counts them per user
// into a topic, and kcat reads the counts back as a read_committed
// consumer. Install kcat (Debian package kcat) to run it.
func TestWithKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (Debian package kcat: apt-get install kcat): skipping the test with a real Kafka client")
	}
	conn, adm := newCluster(t, kafka.ListenAddr("127.0.0.1:0"))
	createTopic(t, adm, "kcat-clicks", 3)
	createTopic(t, adm, "kcat-counts", 2)
	broker := conn.Brokers[0]
	ctx := testContext(t)

	in := clicks(120, 5)
	var lines bytes.Buffer
	for _, c := range in {
		value, err := c.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		lines.WriteString(c.User + "\t")
		lines.Write(value)
		lines.WriteByte('\n')
	}
	// Keyed by user, so a user's clicks stay in order in one partition.
	cmd := exec.CommandContext(ctx, kcat, "-b", broker, "-P", "-t", "kcat-clicks", "-K", "\t", "-X", "enable.idempotence=true")
	cmd.Stdin = &lines
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"kcat-clicks"}, StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 50})
	defer src.Close()
	sink := kafka.Sink[fixtures.UserCount](kafka.SinkOptions[fixtures.UserCount]{Connection: conn, Topic: "kcat-counts",
		Key: func(u *fixtures.UserCount) []byte { return []byte(u.User) }})
	defer sink.Close()
	byUser := typed.GroupByKey(typed.From[fixtures.Click](src), func(c *fixtures.Click) string { return c.User })
	q := runAvailableNow(t, typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks), sink), newCheckpoint())
	if n := inputRows(q); n != int64(len(in)) {
		t.Fatalf("the query read %d clicks, want %d", n, len(in))
	}

	cmd = exec.CommandContext(ctx, kcat, "-b", broker, "-C", "-t", "kcat-counts", "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%k\t%s\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -C: %v", err)
	}
	latest := map[string]fixtures.UserCount{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		key, value, ok := strings.Cut(line, "\t")
		var u fixtures.UserCount
		if !ok {
			t.Fatalf("kcat printed %q", line)
		}
		if err := u.UnmarshalJSON([]byte(value)); err != nil || u.User != key {
			t.Fatalf("kcat printed %q: %v", line, err)
		}
		latest[u.User] = u // in partition order, and a user's counts are in one partition
	}
	sameCounts(t, latest, expectedCounts(in))
}
