package runtime

import (
	"context"
	"testing"
	"time"
)

// skippingLetters is a dead-letter sink of the user's, which may skip a
// batch id it has seen.
type skippingLetters struct{}

func (skippingLetters) WriteDeadLetters(context.Context, int64, []DeadLetter) error { return nil }

// TestPlansSyncedBySinks: with SyncInterval, a batch's plan is synced
// before its sinks run when a sink or the dead-letter sink neither
// rewinds nor is at least once, committer or not; synced at every batch,
// a plan is synced anyway.
func TestPlansSyncedBySinks(t *testing.T) {
	rewind := func(context.Context, int64) error { return nil }
	committer := func(s *Store) Committer { return s }
	for _, tc := range []struct {
		name      string
		interval  time.Duration
		outs      []Output
		dead      DeadLetterSink
		committer func(*Store) Committer
		want      bool
	}{
		{"a sink that may skip ids, synced every batch", 0, []Output{{}}, nil, nil, false},
		{"a sink that may skip ids", time.Second, []Output{{}}, nil, nil, true},
		{"a sink that may skip ids, with a committer", time.Second, []Output{{}}, nil, committer, true},
		{"a files sink", time.Second, []Output{{Rewind: rewind}}, nil, nil, false},
		{"an at-least-once sink and one that may skip ids", time.Second, []Output{{AtLeastOnce: true}, {}}, nil, nil, true},
		{"at-least-once sinks, dead letters in memory", time.Second, []Output{{AtLeastOnce: true}}, DeadLetterMemory(), nil, false},
		{"dead letters in files", time.Second, []Output{{AtLeastOnce: true}}, DeadLetterDir("dead"), nil, false},
		{"dead letters that may skip ids", time.Second, []Output{{AtLeastOnce: true}}, skippingLetters{}, nil, true},
	} {
		q := &Query{plan: &Plan{Outputs: tc.outs}, store: &Store{opts: StoreOptions{SyncInterval: tc.interval}},
			cfg: config{deadLetters: tc.dead, committer: tc.committer}}
		if got := q.plansSynced(); got != tc.want {
			t.Errorf("%s: plans synced %v, want %v", tc.name, got, tc.want)
		}
	}
}
