package kafka

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// A source with Options.CommitGroup commits the end offsets of each batch
// committed to the group (runtime.CommitListener), for tools that watch
// the group's lag.

// groupCommitTimeout bounds one commit to the group.
const groupCommitTimeout = 30 * time.Second

// groupCommits is the goroutine that commits a source's offsets to
// Options.CommitGroup, and what it is to commit next.
type groupCommits struct {
	pending offsets // the latest batch's end offsets not yet committed; guarded by TopicSource.mu
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// Committed hands the end offsets of a committed batch to the goroutine
// that commits them to Options.CommitGroup (started at the first call),
// replacing any it has not committed yet.
func (s *TopicSource) Committed(_, end json.RawMessage) {
	if s.opts.CommitGroup == "" || s.err != nil {
		return
	}
	o, err := s.decode(end, "committed")
	if err != nil {
		slog.Warn("streamgen: kafka source: cannot commit a batch's offsets to the group", "source", s.name, "group", s.opts.CommitGroup, "error", err)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.group == nil {
		s.group = &groupCommits{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
		go s.commitToGroup(s.group)
	}
	s.group.pending = o
	g := s.group
	s.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// commitToGroup commits g's pending offsets whenever there are some, until
// g.stop is closed, and then once more.
func (s *TopicSource) commitToGroup(g *groupCommits) {
	defer close(g.done)
	for {
		select {
		case <-g.wake:
			s.commitPending(g)
		case <-g.stop:
			s.commitPending(g)
			return
		}
	}
}

// commitPending commits g's pending offsets, if any, to the group.
func (s *TopicSource) commitPending(g *groupCommits) {
	s.mu.Lock()
	o := g.pending
	g.pending = nil
	client := s.client
	s.mu.Unlock()
	if len(o) == 0 || client == nil {
		return
	}
	commit := make(kadm.Offsets)
	for tp, off := range o {
		commit.AddOffset(tp.topic, tp.partition, off, -1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupCommitTimeout)
	defer cancel()
	resp, err := kadm.NewClient(client).CommitOffsets(ctx, s.opts.CommitGroup, commit)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		slog.Warn("streamgen: kafka source: committing a batch's offsets to the group failed (the next batch's are tried)",
			"source", s.name, "group", s.opts.CommitGroup, "error", err)
	}
}

// finish stops the goroutine, after its last commit.
func (g *groupCommits) finish() {
	close(g.stop)
	<-g.done
}
