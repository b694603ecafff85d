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
//	streamgen_app_task_restarts_total{group}                 tasks started again after a failure (AppOptions.OnTaskError)
//
// Safe for concurrent use.
func (a *App) Collector() prometheus.Collector { return appCollector{a} }

type appCollector struct{ a *App }

var (
	appGroup           = []string{"group"}
	appPartition       = []string{"group", "partition"}
	appTasksDesc       = prometheus.NewDesc("streamgen_app_tasks", "Tasks the instance runs, restored.", appGroup, nil)
	appRestoringDesc   = prometheus.NewDesc("streamgen_app_tasks_restoring", "Tasks restoring their state.", appGroup, nil)
	appRemainingDesc   = prometheus.NewDesc("streamgen_app_restore_remaining_records", "Changelog records a restoring task has still to read.", appPartition, nil)
	appRestoredDesc    = prometheus.NewDesc("streamgen_app_restored_records_total", "Changelog records the tasks' restores applied.", appGroup, nil)
	appRestoreTimeDesc = prometheus.NewDesc("streamgen_app_restore_seconds_total", "Time the tasks' restores took.", appGroup, nil)
	appStandbysDesc    = prometheus.NewDesc("streamgen_app_standbys", "Standbys the instance keeps.", appGroup, nil)
	appStandbyLagDesc  = prometheus.NewDesc("streamgen_app_standby_lag_records", "Changelog records a standby is behind.", appPartition, nil)
	appChangesDesc     = prometheus.NewDesc("streamgen_app_assignment_changes_total", "Assignment changes: partitions gained or given up.", appGroup, nil)
	appFencedDesc      = prometheus.NewDesc("streamgen_app_tasks_fenced_total", "Tasks whose producer was fenced: the instance rejoined the group.", appGroup, nil)
	appRestartsDesc    = prometheus.NewDesc("streamgen_app_task_restarts_total", "Tasks started again after a failure.", appGroup, nil)
)

func (c appCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{appTasksDesc, appRestoringDesc, appRemainingDesc, appRestoredDesc, appRestoreTimeDesc, appStandbysDesc, appStandbyLagDesc, appChangesDesc, appFencedDesc, appRestartsDesc} {
		ch <- d
	}
}

func (c appCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	st := a.Status()
	g := a.opts.Group
	var tasks, restoring float64
	for _, t := range st.Tasks {
		if !t.Restoring {
			tasks++
			continue
		}
		restoring++
		ch <- prometheus.MustNewConstMetric(appRemainingDesc, prometheus.GaugeValue, float64(max(0, t.RestoreTotal-t.RestoredRecords)), g, strconv.Itoa(int(t.Partition)))
	}
	ch <- prometheus.MustNewConstMetric(appTasksDesc, prometheus.GaugeValue, tasks, g)
	ch <- prometheus.MustNewConstMetric(appRestoringDesc, prometheus.GaugeValue, restoring, g)
	ch <- prometheus.MustNewConstMetric(appStandbysDesc, prometheus.GaugeValue, float64(len(st.Standbys)), g)
	for _, s := range st.Standbys {
		ch <- prometheus.MustNewConstMetric(appStandbyLagDesc, prometheus.GaugeValue, float64(s.Lag), g, strconv.Itoa(int(s.Partition)))
	}
	a.mu.Lock()
	restored, took, changes, fenced, restarts := a.restoredRecords, a.restoreTime, a.assignments, a.fencedTasks, a.taskRestarts
	a.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(appRestoredDesc, prometheus.CounterValue, float64(restored), g)
	ch <- prometheus.MustNewConstMetric(appRestoreTimeDesc, prometheus.CounterValue, took.Seconds(), g)
	ch <- prometheus.MustNewConstMetric(appChangesDesc, prometheus.CounterValue, float64(changes), g)
	ch <- prometheus.MustNewConstMetric(appFencedDesc, prometheus.CounterValue, float64(fenced), g)
	ch <- prometheus.MustNewConstMetric(appRestartsDesc, prometheus.CounterValue, float64(restarts), g)
}
