package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaUnavailable: the failures an App's task starts again on
// without OnTaskError (Kafka slow or out of reach), and those it does not
// (a topic Kafka does not know, an error of the broker's that is not
// retriable, errors that are not Kafka's answers, such as a user
// function's deadline, an EOF, a dial of another service), each wrapped
// as a task's error is.
func TestKafkaUnavailable(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("streamgen: batch 7: sink kafka:counts: %w", err) }
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w for ProduceTimeout (1s) during the write", errNoAcknowledgement), true},
		{kgo.ErrRecordTimeout, true},
		{kgo.ErrRecordRetries, true},
		{kerr.NotEnoughReplicas, true},
		{kerr.RequestTimedOut, true},
		{kerr.CoordinatorNotAvailable, true},
		{kerr.TransactionAbortable, true},
		{fmt.Errorf("%w for ProduceTimeout (1s) during the commit: %w", errNoAcknowledgement, context.DeadlineExceeded), true},
		{dial, false},
		{context.DeadlineExceeded, false},
		{io.EOF, false},
		{io.ErrUnexpectedEOF, false},
		{&url.Error{Op: "Get", URL: "http://registry:8081", Err: dial}, false},
		{fmt.Errorf("commit: %w; and its abort: %v", kerr.TransactionalIDAuthorizationFailed, kerr.RequestTimedOut), false},
		{kerr.UnknownTopicOrPartition, false},
		{kerr.UnknownServerError, false},
		{kerr.MessageTooLarge, false},
		{kerr.ProducerFenced, false}, // (the task is given up: taskMigrated)
		{context.Canceled, false},
		{errors.New("key bob: a failure"), false},
	} {
		if got := kafkaUnavailable(wrap(tc.err)); got != tc.want {
			t.Errorf("kafkaUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
