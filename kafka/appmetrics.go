package kafka

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns the App's metrics, for a Prometheus registry (with
// observe: srv.Metrics.Register(app.Collector())). Each has the label
// group; the tasks' own metrics come from their queries (one query per
// task, named group/partition):
//
//	streamgen_app_tasks{group}                               tasks running, restored
//	streamgen_app_tasks_restoring{group}                     tasks restoring their state
//	streamgen_app_restore_remaining_records{group,partition} changelog records a restoring task has still to read
//	streamgen_app_restored_records_total{group}              changelog records the tasks' restores applied
//	streamgen_app_restore_seconds_total{group}               time the tasks' restores took
//	streamgen_app_standbys{group}                            standbys kept
//	streamgen_app_standby_lag_records{group,partition}       how far a standby is behind its changelog
//	streamgen_app_assignment_changes_total{group}            partitions gained or given up, each change once
//	streamgen_app_tasks_fenced_total{group}                  tasks whose producer was fenced (the instance rejoined the group)
//	streamgen_app_task_restarts_total{group}                 tasks started again after a failure (AppOptions.OnTaskError) or a checkpoint another process held
//
// Each App's collector has descriptions of its own (group is a constant
// label of each), so the collectors of Apps of different groups register
// in one registry; a second collector of one group is refused as a
// duplicate.
//
// Safe for concurrent use.
func (a *App) Collector() prometheus.Collector {
	g := prometheus.Labels{"group": a.opts.Group}
	partition := []string{"partition"}
	desc := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, g)
	}
	return &appCollector{
		a:           a,
		tasks:       desc("streamgen_app_tasks", "Tasks the instance runs, restored.", nil),
		restoring:   desc("streamgen_app_tasks_restoring", "Tasks restoring their state.", nil),
		remaining:   desc("streamgen_app_restore_remaining_records", "Changelog records a restoring task has still to read.", partition),
		restored:    desc("streamgen_app_restored_records_total", "Changelog records the tasks' restores applied.", nil),
		restoreTime: desc("streamgen_app_restore_seconds_total", "Time the tasks' restores took.", nil),
		standbys:    desc("streamgen_app_standbys", "Standbys the instance keeps.", nil),
		standbyLag:  desc("streamgen_app_standby_lag_records", "Changelog records a standby is behind.", partition),
		changes:     desc("streamgen_app_assignment_changes_total", "Assignment changes: partitions gained or given up.", nil),
		fenced:      desc("streamgen_app_tasks_fenced_total", "Tasks whose producer was fenced: the instance rejoined the group.", nil),
		restarts:    desc("streamgen_app_task_restarts_total", "Tasks started again after a failure, or a checkpoint another process held.", nil),
	}
}

// appCollector is an App's Collector: its metrics' descriptions, of its
// group.
type appCollector struct {
	a                                                  *App
	tasks, restoring, remaining, restored, restoreTime *prometheus.Desc
	standbys, standbyLag, changes, fenced, restarts    *prometheus.Desc
}

func (c *appCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.tasks, c.restoring, c.remaining, c.restored, c.restoreTime, c.standbys, c.standbyLag, c.changes, c.fenced, c.restarts} {
		ch <- d
	}
}

func (c *appCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	st := a.Status()
	var tasks, restoring float64
	for _, t := range st.Tasks {
		if !t.Restoring {
			tasks++
			continue
		}
		restoring++
		ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(max(0, t.RestoreTotal-t.RestoredRecords)), strconv.Itoa(int(t.Partition)))
	}
	ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, tasks)
	ch <- prometheus.MustNewConstMetric(c.restoring, prometheus.GaugeValue, restoring)
	ch <- prometheus.MustNewConstMetric(c.standbys, prometheus.GaugeValue, float64(len(st.Standbys)))
	for _, s := range st.Standbys {
		ch <- prometheus.MustNewConstMetric(c.standbyLag, prometheus.GaugeValue, float64(s.Lag), strconv.Itoa(int(s.Partition)))
	}
	a.mu.Lock()
	restored, took, changes, fenced, restarts := a.restoredRecords, a.restoreTime, a.assignments, a.fencedTasks, a.taskRestarts
	a.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(c.restored, prometheus.CounterValue, float64(restored))
	ch <- prometheus.MustNewConstMetric(c.restoreTime, prometheus.CounterValue, took.Seconds())
	ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(changes))
	ch <- prometheus.MustNewConstMetric(c.fenced, prometheus.CounterValue, float64(fenced))
	ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(restarts))
}
