package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/runtime"
)

// Reset makes the App start over at its next Run, as Kafka Streams'
// application reset tool and KafkaStreams.cleanUp do together, for
// reprocessing (a fixed bug, a changed pipeline): it deletes the
// changelog topic (and, with RepartitionBy, the repartition topic and its
// changelog), the group and its committed offsets, and the checkpoints
// under Dir, so that every task reads its input again from its sources'
// StartingOffsets with no state. The input and output topics are not
// touched: consumers of the output see the results again.
//
// No instance of the App may run: Reset refuses while the group has
// members, naming them. It removes this instance's checkpoints only, as
// Kafka Streams' cleanUp does; a checkpoint left on another machine is
// not taken up again: Reset makes the changelog topics again at once,
// with a record of the reset in each partition, and a task or standby
// that finds its checkpoint of the deleted topic (the topic's ID differs,
// or, where the cluster gives none, the checkpoint is older than the
// reset) replaces the checkpoint's state with the topic's. (A
// changelog topic deleted by hand and made again empty is the other
// case: a checkpoint is copied back into it.) Those checkpoints take
// room until the App's StateCleanupDelay removes them, or a Reset on
// their machine. Call it on an App that has not run, then Run it (or
// another App of the same options). Not safe for concurrent use with
// Run.
func (a *App) Reset(ctx context.Context) error {
	if a.err != nil {
		return a.err
	}
	if a.ran.Load() {
		return fmt.Errorf("streamgen: kafka app %q: Reset after Run: reset an App that has not run", a.opts.Group)
	}
	client, err := a.opts.Connection.newClient()
	if err != nil {
		return fmt.Errorf("streamgen: kafka app %q: reset: client: %w", a.opts.Group, err)
	}
	defer client.Close()
	adm := kadm.NewClient(client)
	// Dir first, so that nothing is deleted while an instance of this
	// machine runs on it; its refusal names the group's members, when
	// it has some.
	unlock, err := a.lockDir()
	if err != nil {
		if members := a.members(ctx, adm); len(members) > 0 {
			return fmt.Errorf("streamgen: kafka app %q: reset: the group has members (%s): stop every instance first", a.opts.Group, strings.Join(members, ", "))
		}
		return fmt.Errorf("%w (Reset needs every instance stopped)", err)
	}
	defer unlock()
	// Then the group: the coordinator refuses to delete a group with
	// members, so no instance can join between a check and the deletes.
	dg, err := adm.DeleteGroups(ctx, a.opts.Group)
	if err == nil {
		err = dg.Error()
	}
	switch {
	case err == nil, errors.Is(err, kerr.GroupIDNotFound):
	case errors.Is(err, kerr.NonEmptyGroup):
		return fmt.Errorf("streamgen: kafka app %q: reset: the group has members (%s): stop every instance first (one with an InstanceID stays a member for its SessionTimeout after it stops): %w",
			a.opts.Group, strings.Join(a.members(ctx, adm), ", "), err)
	default:
		return fmt.Errorf("streamgen: kafka app %q: reset: delete the group: %w", a.opts.Group, err)
	}
	topics := []string{a.opts.Changelog, a.repartitionTopic(), a.opts.Group + "-repartition-changelog"}
	deleted, err := adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("streamgen: kafka app %q: reset: delete the topics %v: %w", a.opts.Group, topics, err)
	}
	for _, d := range deleted.Sorted() {
		switch {
		case d.Err == nil:
			slog.Info("streamgen: kafka app: reset: deleted topic", "group", a.opts.Group, "topic", d.Topic)
		case errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		default:
			return fmt.Errorf("streamgen: kafka app %q: reset: delete topic %s: %w", a.opts.Group, d.Topic, d.Err)
		}
	}
	// Deleting a topic takes a moment: markChangelogs makes the
	// changelogs again.
	for {
		listed, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return fmt.Errorf("streamgen: kafka app %q: reset: list the topics %v: %w", a.opts.Group, topics, err)
		}
		var left []string
		for _, d := range listed.Sorted() {
			if d.Err == nil {
				left = append(left, d.Topic)
			}
		}
		if len(left) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("streamgen: kafka app %q: reset: the topics %v are still being deleted: %w", a.opts.Group, left, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := a.markChangelogs(ctx); err != nil {
		return err
	}
	return a.removeCheckpoints()
}

// markChangelogs makes the App's changelog topics again, as a task would
// at its start, and writes the reset's record (changelogResetKey) into
// each of their partitions.
func (a *App) markChangelogs(ctx context.Context) error {
	partitions, err := a.checkTopics(ctx)
	if err != nil {
		return err
	}
	topics := []string{a.opts.Changelog}
	if a.opts.RepartitionBy != nil {
		topics = append(topics, a.opts.Group+"-repartition-changelog")
	}
	copts := a.opts.ChangelogOptions
	copts.Connection, copts.Partitions = a.opts.Connection, partitions
	if err := markReset(ctx, copts, topics, time.Now()); err != nil {
		return fmt.Errorf("streamgen: kafka app %q: reset: %w (run Reset again before any instance starts)", a.opts.Group, err)
	}
	return nil
}

// markReset makes each of topics, with opts, and writes the record of a
// reset at the time at into each of its opts.Partitions partitions. A
// topic still being deleted is waited for.
func markReset(ctx context.Context, opts ChangelogOptions, topics []string, at time.Time) error {
	client, err := opts.Connection.newClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer client.Close()
	value, err := json.Marshal(resetMark{At: at.UnixMilli()})
	if err != nil {
		return err
	}
	var marks []*kgo.Record
	for _, topic := range topics {
		copts := opts
		copts.Topic = topic
		for {
			err := newChangelog(copts, nil).ensureTopic(ctx, client)
			if err == nil {
				break
			}
			// A deletion the cluster has not finished (the name still
			// taken, its partitions gone: ensureTopic's describe finds
			// no topic) is waited for.
			if !errors.Is(err, kerr.UnknownTopicOrPartition) {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (%w)", err, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
		for p := range opts.Partitions {
			marks = append(marks, &kgo.Record{Topic: topic, Partition: p, Key: []byte(changelogResetKey), Value: value})
		}
	}
	if err := client.ProduceSync(ctx, marks...).FirstErr(); err != nil {
		return fmt.Errorf("mark the changelog topics %v: %w", topics, err)
	}
	return nil
}

// members names the members of the App's group, as far as the cluster
// tells: host and member or instance id.
func (a *App) members(ctx context.Context, adm *kadm.Client) []string {
	var members []string
	if groups, err := adm.DescribeGroups(ctx, a.opts.Group); err == nil {
		for _, m := range groups[a.opts.Group].Members {
			id := m.MemberID
			if m.InstanceID != nil {
				id = "instance " + *m.InstanceID
			}
			members = append(members, m.ClientHost+" "+id)
		}
	}
	return members
}

// removeCheckpoints removes what the App keeps under Dir: the tasks' and
// standbys' checkpoints (a directory per partition), the repartition
// tasks' and what a removal left. Anything else under Dir stays.
func (a *App) removeCheckpoints() error {
	fsys := runtime.FileSystemOf(a.opts.Options...)
	entries, err := fsys.List(a.opts.Dir)
	if err != nil {
		return nil // no Dir: nothing kept
	}
	for _, name := range entries {
		if _, ok := partitionDir(name); !ok && name != "repartition" && !strings.HasPrefix(name, removedPrefix) {
			continue
		}
		if err := fsys.RemoveAll(fsys.PathJoin(a.opts.Dir, name)); err != nil {
			return fmt.Errorf("streamgen: kafka app %q: reset: remove %s: %w", a.opts.Group, fsys.PathJoin(a.opts.Dir, name), err)
		}
	}
	return nil
}
