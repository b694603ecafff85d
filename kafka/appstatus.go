package kafka

import (
	"slices"
	"time"
)

// AppStatus is what an instance of an App runs and knows of the group:
// its tasks (with how each restored its state), its standbys (how far
// behind the changelog each is), every partition's owner and standbys as
// the group's last assignment names them, and the instance's latest
// rebalances.
type AppStatus struct {
	Group string `json:"group"`
	// Addr is the instance's AdvertisedAddr.
	Addr  string       `json:"addr,omitempty"`
	Tasks []TaskStatus `json:"tasks"`
	// Waiting are the tasks that failed and wait to start again.
	Waiting  []WaitingTask   `json:"waiting,omitempty"`
	Standbys []StandbyStatus `json:"standbys"`
	// Partitions are the group's partitions, their owners and standbys.
	Partitions []PartitionStatus `json:"partitions"`
	// Rebalances are the instance's latest assignment changes, oldest
	// first (at most 20).
	Rebalances []Rebalance `json:"rebalances"`
}

// TaskStatus is a task the instance runs.
type TaskStatus struct {
	Partition int32 `json:"partition"`
	// Started is when the task's query started, after its restore.
	Started time.Time `json:"started"`
	// RestoredFrom is where the task's state came from: "standby" (a
	// standby's warm copy, which the restore brought up to date),
	// "checkpoint" (the instance's own copy, from when it last owned the
	// partition), or "changelog" (none: all of it read from the
	// changelog). RestoredRecords are the changelog records the restore
	// applied, in RestoreTook.
	RestoredFrom    string        `json:"restoredFrom"`
	RestoredRecords int64         `json:"restoredRecords"`
	RestoreTook     time.Duration `json:"restoreTook"`
	// Restoring is set while the task restores its state (Started is
	// then when it began): RestoreTotal are the changelog records it
	// reads, RestoredRecords those applied so far.
	Restoring    bool  `json:"restoring,omitempty"`
	RestoreTotal int64 `json:"restoreTotal,omitempty"`
	// Restarts counts the task's starts after a failure (OnTaskError's
	// RestartTask) since the partition's last batch: a task that fails
	// again and again shows it rising.
	Restarts int `json:"restarts,omitempty"`
}

// WaitingTask is a task of the instance that is not running: it failed,
// and waits to start again (OnTaskError's RestartTask, or a checkpoint
// another process holds, such as streamgen inspect).
type WaitingTask struct {
	Partition int32 `json:"partition"`
	// Error is the failure it waits after; NextStart when it starts
	// again; Restarts as TaskStatus's.
	Error     string    `json:"error"`
	NextStart time.Time `json:"nextStart"`
	Restarts  int       `json:"restarts"`
}

// StandbyStatus is a standby the instance keeps.
type StandbyStatus struct {
	Partition int32 `json:"partition"`
	// Position is the changelog offset its copy holds up to, Lag the
	// records it is behind the changelog's end (at its last fetch),
	// Records those it has applied, and BatchID the last batch its copy
	// holds.
	Position int64 `json:"position"`
	Lag      int64 `json:"lag"`
	Records  int64 `json:"records"`
	BatchID  int64 `json:"batchId"`
}

// PartitionStatus is a partition as the group's last assignment gives
// it: its owner's member id and address ("" while it moves), and its
// standbys'.
type PartitionStatus struct {
	Partition    int32    `json:"partition"`
	Owner        string   `json:"owner,omitempty"`
	OwnerAddr    string   `json:"ownerAddr,omitempty"`
	Standbys     []string `json:"standbys,omitempty"`
	StandbyAddrs []string `json:"standbyAddrs,omitempty"`
}

// Rebalance is an assignment change of the instance: the partitions
// whose tasks it started, and those it stopped (Lost: taken from it
// without a revoke, as when it missed the group's session timeout;
// Fenced: a task's producer was fenced, or lost its sequence, and the
// instance rejoined the group).
type Rebalance struct {
	Time     time.Time `json:"time"`
	Assigned []int32   `json:"assigned,omitempty"`
	Revoked  []int32   `json:"revoked,omitempty"`
	Lost     bool      `json:"lost,omitempty"`
	Fenced   bool      `json:"fenced,omitempty"`
}

// keptRebalances is how many rebalances Status keeps.
const keptRebalances = 20

// Status returns what the instance runs and knows of the group now. Safe
// for concurrent use.
func (a *App) Status() AppStatus {
	st := AppStatus{Group: a.opts.Group, Addr: a.opts.AdvertisedAddr, Tasks: []TaskStatus{}, Standbys: []StandbyStatus{}, Partitions: []PartitionStatus{}}
	a.mu.Lock()
	for _, t := range a.taskStatus {
		t.Restarts = a.restarts[t.Partition]
		st.Tasks = append(st.Tasks, t)
	}
	for p, r := range a.restoring {
		ts := TaskStatus{Partition: p, Started: r.since, RestoredFrom: r.from, Restoring: true, RestoreTook: time.Since(r.since), Restarts: a.restarts[p]}
		if c := r.changelog.Load(); c != nil {
			ts.RestoreTotal, ts.RestoredRecords = c.restoreTotal.Load(), c.restoreApplied.Load()
		}
		st.Tasks = append(st.Tasks, ts)
	}
	for p, w := range a.waiting {
		st.Waiting = append(st.Waiting, WaitingTask{Partition: p, Error: w.err, NextStart: w.next, Restarts: a.restarts[p]})
	}
	for p, sb := range a.standbys {
		if sb.stopping {
			continue
		}
		s := a.standbyStats[p]
		st.Standbys = append(st.Standbys, StandbyStatus{Partition: p, Position: s.Position, Lag: s.Lag, Records: s.Records, BatchID: s.BatchID})
	}
	st.Rebalances = slices.Clone(a.rebalances)
	a.mu.Unlock()
	slices.SortFunc(st.Tasks, func(x, y TaskStatus) int { return int(x.Partition - y.Partition) })
	slices.SortFunc(st.Standbys, func(x, y StandbyStatus) int { return int(x.Partition - y.Partition) })
	slices.SortFunc(st.Waiting, func(x, y WaitingTask) int { return int(x.Partition - y.Partition) })
	if info := a.assignment.Load(); info != nil {
		for p := range int32(len(info.Owners)) {
			ps := PartitionStatus{Partition: p}
			if m, ok := info.owner(p); ok {
				ps.Owner, ps.OwnerAddr = m.ID, m.Addr
			}
			for _, m := range info.standbysOf(p) {
				ps.Standbys, ps.StandbyAddrs = append(ps.Standbys, m.ID), append(ps.StandbyAddrs, m.Addr)
			}
			st.Partitions = append(st.Partitions, ps)
		}
	}
	return st
}

// rebalanced records an assignment change, with mu held.
func (a *App) rebalanced(r Rebalance) {
	a.assignments++
	a.rebalances = append(a.rebalances, r)
	if n := len(a.rebalances); n > keptRebalances {
		a.rebalances = slices.Delete(a.rebalances, 0, n-keptRebalances)
	}
}
