package observe

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamgen/streamgen/runtime"
)

// Namespace prefixes every metric name.
const Namespace = "streamgen"

// DurationBuckets are the upper bounds, in seconds, of the buckets of
// streamgen_batch_duration_seconds: from a millisecond to ten minutes.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 150, 300, 600}

// Metrics exports the progress of queries as Prometheus metrics. It is a
// query listener (pass it to each query with runtime.Listener; one Metrics
// serves any number of queries) and a prometheus.Collector; Handler serves
// it on its own, or register it in a registry of your own.
//
// Each metric has the label query: the query's name (runtime.Name), or
// its id for a query without one. Two queries given the same name share
// their series, so give each query that runs at once a name of its own.
// Counters (_total) add up the batches this Metrics has seen of a query,
// across its runs; gauges hold what the last batch reported, while the
// run lasts: when it ends, query_running is 0 and the gauges of its
// state go (see OnQueryTerminated). The metrics, all prefixed streamgen_:
//
//	query_running{query}                          1 while a run of the query is started and not ended
//	query_info{query,id,run_id}                   1 for the query's current run
//	batches_total{query}                          batches committed
//	batch_id{query}                               the id of the last batch committed
//	input_rows_total{query}                       rows read (decoded or not)
//	output_rows_total{query}                      rows written to the sink
//	dead_letters_total{query}                     rows that did not decode
//	input_rows_per_second{query}                  the last batch's input rate (rows over the time since the trigger before it started, as Spark's)
//	processed_rows_per_second{query}              the last batch's rows over its duration
//	batch_duration_seconds{query,phase}           histogram of the batches' phases: phase is a key of QueryProgress.DurationMs (runtime.DurationGetBatch, ...)
//	state_rows{query,operator,kind}               the state rows of a stateful operator (operator: its name, the user function's without package paths, followed by "#" and its index in the query when another operator has that name too, or its index when it has none; kind: mapGroupsWithState, symmetricHashJoin, ...)
//	state_operator_metric{query,operator,kind,metric} an operator's own figure (a join's numLeftRows, numRightRows)
//	state_rows_updated_total{query,operator,kind} state rows written
//	state_rows_removed_total{query,operator,kind} state rows removed
//	late_rows_total{query,operator,kind}          rows dropped as behind the watermark
//	source_lag_records{query,source,partition}    how many records (offsets) the last batch's end is behind the latest available in a source's partition (runtime.SourceProgress.Lag); for a files source, partition "files" and the files not yet read
//	source_lag_bytes{query,source,partition}      for a files source, the bytes of the files not yet read
//	watermark_seconds{query}                      the watermark in effect, as Unix seconds; absent before the first and after the end-of-input flush (runtime.FlushEventTime)
//	watermark_delay_seconds{query}                how far the watermark is behind the wall clock, at the scrape; absent with watermark_seconds
//	store_*{query}                                the state store at the end of the last batch (runtime.StoreProgress):
//	    store_memtable_bytes, store_memtables, store_block_cache_bytes, store_block_cache_hits_total,
//	    store_block_cache_misses_total, store_state_cache_bytes, store_state_cache_entries,
//	    store_state_cache_hits_total, store_state_cache_misses_total, store_compactions_total,
//	    store_flushes_total, store_compaction_debt_bytes, store_read_amplification,
//	    store_table_bytes, store_tables, store_wal_bytes, store_disk_bytes,
//	    store_disk_available_bytes, store_disk_reserve_bytes (a batch that would leave
//	    less available than the reserve ends the query with runtime.ErrDiskFull)
//
// The store's counters (store_*_total) count since the store was opened,
// that is since the query's run started: they restart from 0 at each run,
// which Prometheus's rate() reads as a counter reset. Handler serves the
// Go runtime's and the process's metrics beside them (go_* and process_*,
// the client library's standard collectors).
//
// Safe for concurrent use: the queries call it from their goroutines
// while it is scraped.
type Metrics struct {
	now      func() time.Time
	registry *prometheus.Registry

	mu sync.Mutex
	// labels are the query label of each query id seen; queries the
	// last report of each label.
	labels  map[string]string
	queries map[string]*query

	batches, inputRows, outputRows, deadLetters *prometheus.CounterVec
	otherSinkRows                               *prometheus.CounterVec
	running, batchID, inputRate, processRate    *prometheus.GaugeVec
	info                                        *prometheus.GaugeVec
	durations                                   *prometheus.HistogramVec
	stateRows                                   *prometheus.GaugeVec
	stateMetric                                 *prometheus.GaugeVec
	lag, lagBytes                               *prometheus.GaugeVec
	updated, removed, late                      *prometheus.CounterVec
	watermarkDesc, delayDesc                    *prometheus.Desc
	store                                       []storeMetric
}

// query is what Metrics keeps of a query between scrapes.
type query struct {
	id, runID string
	last      runtime.QueryProgress
	reported  bool
}

// storeMetric is one figure of runtime.StoreProgress.
type storeMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*runtime.StoreProgress) int64
}

// NewMetrics returns a Metrics that has seen no query.
func NewMetrics() *Metrics {
	q := []string{"query"}
	op := []string{"query", "operator", "kind"}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels []string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	m := &Metrics{
		now:        time.Now,
		labels:     map[string]string{},
		queries:    map[string]*query{},
		batches:    counter("batches_total", "Batches committed.", q),
		inputRows:  counter("input_rows_total", "Rows read from the sources, decoded or not.", q),
		outputRows: counter("output_rows_total", "Rows written to the sink.", q),
		otherSinkRows: counter("other_sink_output_rows_total", "Rows written to each further sink of a query of several (typed.WriteAll): output is its place among the query's outputs (2 for the second), sink its description.",
			[]string{"query", "output", "sink"}),
		deadLetters: counter("dead_letters_total", "Rows that did not decode, sent to the dead letters.", q),
		running:     gauge("query_running", "1 while a run of the query is started and not ended, else 0.", q),
		info:        gauge("query_info", "1 for the query's current run: its id (the same at every start on its checkpoint) and run id.", []string{"query", "id", "run_id"}),
		batchID:     gauge("batch_id", "The id of the last batch committed.", q),
		inputRate:   gauge("input_rows_per_second", "The last batch's rows over the time since the trigger before it started.", q),
		processRate: gauge("processed_rows_per_second", "The last batch's rows over its duration.", q),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "batch_duration_seconds",
			Help: "The duration of the batches' phases; phase is a key of the progress report's durationMs.", Buckets: DurationBuckets}, []string{"query", "phase"}),
		stateRows:   gauge("state_rows", "State rows of a stateful operator after the last batch.", op),
		stateMetric: gauge("state_operator_metric", "A stateful operator's own figure after the last batch (its progress report's customMetrics: a join's rows per side).", append(op[:3:3], "metric")),
		lag: gauge("source_lag_records", "How many records (Kafka offsets; a files source's files) the last batch's end is behind the latest available, per source partition.",
			[]string{"query", "source", "partition"}),
		lagBytes:      gauge("source_lag_bytes", "The bytes a files source has not read yet, per source.", []string{"query", "source", "partition"}),
		updated:       counter("state_rows_updated_total", "State rows written by a stateful operator.", op),
		removed:       counter("state_rows_removed_total", "State rows removed by a stateful operator.", op),
		late:          counter("late_rows_total", "Rows dropped by a stateful operator as behind the watermark.", op),
		watermarkDesc: prometheus.NewDesc(Namespace+"_watermark_seconds", "The event-time watermark in effect in the last batch, as Unix seconds; absent before the first.", q, nil),
		delayDesc:     prometheus.NewDesc(Namespace+"_watermark_delay_seconds", "How far the watermark is behind the wall clock at the scrape, in seconds.", q, nil),
	}
	for _, s := range []struct {
		name, help string
		kind       prometheus.ValueType
		value      func(*runtime.StoreProgress) int64
	}{
		{"store_memtable_bytes", "Memory of the state store's memtables.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.MemtableBytes }},
		{"store_memtables", "The state store's memtables.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.MemtableCount }},
		{"store_block_cache_bytes", "Memory held by the state store's block cache.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.BlockCacheBytes }},
		{"store_block_cache_hits_total", "Block cache hits since the store was opened.", prometheus.CounterValue, func(p *runtime.StoreProgress) int64 { return p.BlockCacheHits }},
		{"store_block_cache_misses_total", "Block cache misses since the store was opened.", prometheus.CounterValue, func(p *runtime.StoreProgress) int64 { return p.BlockCacheMisses }},
		{"store_state_cache_bytes", "Memory used by the cache of committed state.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.StateCacheBytes }},
		{"store_state_cache_entries", "Entries in the cache of committed state.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.StateCacheEntries }},
		{"store_state_cache_hits_total", "State cache hits since the store was opened.", prometheus.CounterValue, func(p *runtime.StoreProgress) int64 { return p.StateCacheHits }},
		{"store_state_cache_misses_total", "State cache misses since the store was opened.", prometheus.CounterValue, func(p *runtime.StoreProgress) int64 { return p.StateCacheMisses }},
		{"store_compactions_total", "Compactions since the store was opened.", prometheus.CounterValue, func(p *runtime.StoreProgress) int64 { return p.Compactions }},
		{"store_flushes_total", "Memtable flushes since the store was opened.", prometheus.CounterValue, func(p *runtime.StoreProgress) int64 { return p.Flushes }},
		{"store_compaction_debt_bytes", "Estimated bytes left to compact.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.CompactionDebtBytes }},
		{"store_read_amplification", "Sorted runs a read of the store may look through.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.ReadAmplification }},
		{"store_table_bytes", "Bytes of the state store's live tables on disk.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.TableBytes }},
		{"store_tables", "The state store's live tables.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.TableCount }},
		{"store_wal_bytes", "Bytes of the state store's write-ahead log on disk.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.WALBytes }},
		{"store_disk_bytes", "Bytes the state store has on disk.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.DiskBytes }},
		{"store_disk_available_bytes", "Free bytes of the file system of the state store.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.DiskAvailableBytes }},
		{"store_disk_reserve_bytes", "Bytes of that file system the state store keeps free: a batch that would leave less ends the query.", prometheus.GaugeValue, func(p *runtime.StoreProgress) int64 { return p.DiskReserveBytes }},
	} {
		m.store = append(m.store, storeMetric{desc: prometheus.NewDesc(Namespace+"_"+s.name, s.help, q, nil), kind: s.kind, value: s.value})
	}
	m.registry = prometheus.NewRegistry()
	m.registry.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// vecs are the metrics Metrics keeps in vectors of the client library.
func (m *Metrics) vecs() []prometheus.Collector {
	return []prometheus.Collector{m.batches, m.inputRows, m.outputRows, m.otherSinkRows, m.deadLetters, m.running, m.info, m.batchID,
		m.inputRate, m.processRate, m.durations, m.stateRows, m.stateMetric, m.updated, m.removed, m.late, m.lag, m.lagBytes}
}

// Register adds a collector of the program's to the metrics Handler
// serves (a kafka.App's Collector).
func (m *Metrics) Register(c prometheus.Collector) error { return m.registry.Register(c) }

// Handler serves the metrics in the formats Prometheus scrapes (the text
// format unless the scraper asks for another). Mount it where the
// scraper looks, such as /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// label returns the query label of id, called with mu held.
func (m *Metrics) label(id, name string) string {
	if name == "" {
		name = id
	}
	name = labelValue(name)
	if l, ok := m.labels[id]; ok && (name == id || l == name) {
		return l
	}
	m.labels[id] = name
	return name
}

// labelValue is s as a label's value: Prometheus takes only UTF-8, and a
// name may not be (a files source's path, which Linux allows any bytes
// in), so each byte that is not is U+FFFD.
func labelValue(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// OnQueryStarted counts the query as running.
func (m *Metrics) OnQueryStarted(e runtime.QueryStarted) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.label(e.ID, e.Name)
	if q, ok := m.queries[l]; ok {
		m.info.DeleteLabelValues(l, q.id, q.runID)
	}
	q := m.queries[l]
	if q == nil {
		q = &query{}
		m.queries[l] = q
	}
	q.id, q.runID = e.ID, e.RunID
	m.info.WithLabelValues(l, e.ID, e.RunID).Set(1)
	m.running.WithLabelValues(l).Set(1)
}

// OnQueryProgress adds the batch of p to the metrics.
func (m *Metrics) OnQueryProgress(p runtime.QueryProgress) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.label(p.ID, p.Name)
	q := m.queries[l]
	if q == nil { // a listener added to a query already started
		q = &query{id: p.ID, runID: p.RunID}
		m.queries[l] = q
	}
	q.last, q.reported = p, true
	m.batches.WithLabelValues(l).Inc()
	m.batchID.WithLabelValues(l).Set(float64(p.BatchID))
	m.inputRows.WithLabelValues(l).Add(float64(p.NumInputRows))
	m.outputRows.WithLabelValues(l).Add(float64(p.Sink.NumOutputRows))
	for i, s := range p.OtherSinks {
		m.otherSinkRows.WithLabelValues(l, strconv.Itoa(i+2), labelValue(s.Description)).Add(float64(s.NumOutputRows))
	}
	m.deadLetters.WithLabelValues(l).Add(float64(p.NumDeadLetters))
	m.inputRate.WithLabelValues(l).Set(p.InputRowsPerSecond)
	m.processRate.WithLabelValues(l).Set(p.ProcessedRowsPerSecond)
	for phase, ms := range p.DurationMs {
		m.durations.WithLabelValues(l, phase).Observe(float64(ms) / 1000)
	}
	for _, src := range p.Sources {
		if src.Lag == nil {
			continue
		}
		// A partition the source no longer has leaves no series behind.
		source := labelValue(src.Description)
		m.lag.DeletePartialMatch(prometheus.Labels{"query": l, "source": source})
		m.lagBytes.DeletePartialMatch(prometheus.Labels{"query": l, "source": source})
		for _, pl := range src.Lag {
			partition := labelValue(pl.Partition)
			m.lag.WithLabelValues(l, source, partition).Set(float64(pl.Lag))
			if pl.Partition == "files" {
				m.lagBytes.WithLabelValues(l, source, partition).Set(float64(pl.Bytes))
			}
		}
	}
	names := operatorLabels(p.StateOperators)
	for i, op := range p.StateOperators {
		name := names[i]
		m.stateRows.WithLabelValues(l, name, op.OperatorName).Set(float64(op.NumRowsTotal))
		for metric, v := range op.CustomMetrics {
			m.stateMetric.WithLabelValues(l, name, op.OperatorName, labelValue(metric)).Set(float64(v))
		}
		m.updated.WithLabelValues(l, name, op.OperatorName).Add(float64(op.NumRowsUpdated))
		m.removed.WithLabelValues(l, name, op.OperatorName).Add(float64(op.NumRowsRemoved))
		m.late.WithLabelValues(l, name, op.OperatorName).Add(float64(op.NumRowsDroppedByWatermark))
	}
}

// operatorLabels are the operator labels of a query's stateful
// operators: each one's name without package paths ("main.countFn",
// "typed.countAgg[fixtures.Click]" for a generic type's), or, for an
// operator without a name, its index; a name two operators share is
// followed by "#" and the operator's index, so that each has series of
// its own.
func operatorLabels(ops []runtime.StateOperatorProgress) []string {
	labels := make([]string, len(ops))
	seen := make(map[string]int, len(ops))
	for i, op := range ops {
		labels[i] = strconv.Itoa(i)
		if op.Name != "" {
			labels[i] = labelValue(withoutPackagePaths(op.Name))
		}
		seen[labels[i]]++
	}
	for i, l := range labels {
		if seen[l] > 1 {
			labels[i] = l + "#" + strconv.Itoa(i)
		}
	}
	return labels
}

// withoutPackagePaths cuts the package path off each name in a Go type
// or function name, type arguments included:
// "example.com/app/main.count[example.com/app/model.Click]" is
// "main.count[model.Click]".
func withoutPackagePaths(name string) string {
	var b strings.Builder
	start := 0 // of the name being read
	for i := 0; i <= len(name); i++ {
		if i < len(name) && !strings.ContainsRune("[], *();", rune(name[i])) {
			continue
		}
		word := name[start:i]
		if j := strings.LastIndexByte(word, '/'); j >= 0 {
			word = word[j+1:]
		}
		b.WriteString(word)
		if i < len(name) {
			b.WriteByte(name[i])
		}
		start = i + 1
	}
	return b.String()
}

// OnQueryTerminated counts the query's run as ended: query_running is 0,
// its counters stay, and the series that tell a run's current state
// (query_info, batch_id, the rates, state rows and operator figures,
// lag, the watermark and its delay, the store's) go, as the run has no
// current state: a query that ended here (its partition moved to another
// instance of an App, say) is not summed with where it runs now, nor
// does its watermark's delay grow on after it.
func (m *Metrics) OnQueryTerminated(e runtime.QueryTerminated) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.labels[e.ID]
	if !ok {
		return
	}
	q := m.queries[l]
	if q == nil || q.runID != e.RunID {
		return // a run since started
	}
	m.running.WithLabelValues(l).Set(0)
	of := prometheus.Labels{"query": l}
	for _, v := range []*prometheus.GaugeVec{m.info, m.batchID, m.inputRate, m.processRate, m.stateRows, m.stateMetric, m.lag, m.lagBytes} {
		v.DeletePartialMatch(of)
	}
	delete(m.queries, l) // the watermark's and the store's, which Collect makes
}

// Describe sends the descriptions of every metric, for
// prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range m.vecs() {
		v.Describe(ch)
	}
	ch <- m.watermarkDesc
	ch <- m.delayDesc
	for _, s := range m.store {
		ch <- s.desc
	}
}

// Collect sends the current value of every metric, for
// prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, v := range m.vecs() {
		v.Collect(ch)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for l, q := range m.queries {
		if !q.reported {
			continue
		}
		if w, ok := q.last.WatermarkTime(); ok && !w.Equal(runtime.EndOfTime) {
			ch <- prometheus.MustNewConstMetric(m.watermarkDesc, prometheus.GaugeValue, seconds(w), l)
			ch <- prometheus.MustNewConstMetric(m.delayDesc, prometheus.GaugeValue, now.Sub(w).Seconds(), l)
		}
		for _, s := range m.store {
			ch <- prometheus.MustNewConstMetric(s.desc, s.kind, float64(s.value(&q.last.StateStore)), l)
		}
	}
}

// seconds is t as Unix seconds, with its fraction.
func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
