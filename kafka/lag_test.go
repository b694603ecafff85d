package kafka_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
	"github.com/streamgen/streamgen/typed"
)

// TestSourceLag: each batch's report says, per partition, the latest
// offset when the batch was planned, the batch's end, and how far behind
// it is, as counting the records produced to each partition says; the
// summary is Spark's (avg, max and min offsets behind latest); the
// Prometheus gauge follows the last report. Batches limited by
// MaxOffsetsPerTrigger fall behind, then catch up to 0.
func TestSourceLag(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "lagged", 3)
	in := clicks(200, 7)
	records := clickRecords(t, "lagged", 3, in)
	produce(t, conn, records...)
	produced := map[int32]int64{}
	for _, r := range records {
		produced[r.Partition]++
	}

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"lagged"}, StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 30})
	defer src.Close()
	metrics := observe.NewMetrics()
	during := &scrapeEachBatch{m: metrics}
	q := runAvailableNow(t, typed.WriteTo(typed.From[fixtures.Click](src), typed.NewMemorySink[fixtures.Click]()), newCheckpoint(),
		runtime.Name("lagged"), runtime.Listener(metrics), runtime.Listener(during))
	reports := q.RecentProgress()
	if len(reports) < 5 {
		t.Fatalf("%d batches: want the limit to make several", len(reports))
	}
	behind := false
	for _, p := range reports {
		s := p.Sources[0]
		var end map[string]map[string]int64
		if err := json.Unmarshal([]byte(s.EndOffset), &end); err != nil {
			t.Fatalf("batch %d: end offset %s: %v", p.BatchID, s.EndOffset, err)
		}
		if len(s.Lag) != 3 {
			t.Fatalf("batch %d: lag of %d partitions: %+v", p.BatchID, len(s.Lag), s.Lag)
		}
		var sum, hi, lo int64 = 0, 0, 1 << 62
		for i, l := range s.Lag {
			part := int32(i)
			want := produced[part] - end["lagged"][strconv.Itoa(i)]
			if l.Partition != fmt.Sprintf("lagged/%d", i) || l.Latest != produced[part] || l.Position != end["lagged"][strconv.Itoa(i)] || l.Lag != want {
				t.Fatalf("batch %d: partition %d: %+v; want latest %d, position %d, lag %d", p.BatchID, i, l, produced[part], end["lagged"][strconv.Itoa(i)], want)
			}
			sum, hi, lo = sum+want, max(hi, want), min(lo, want)
		}
		behind = behind || sum > 0
		wantMetrics := map[string]string{"avgOffsetsBehindLatest": strconv.FormatFloat(float64(sum)/3, 'f', 1, 64),
			"maxOffsetsBehindLatest": strconv.FormatInt(hi, 10), "minOffsetsBehindLatest": strconv.FormatInt(lo, 10)}
		if fmt.Sprint(s.Metrics) != fmt.Sprint(wantMetrics) {
			t.Fatalf("batch %d: metrics %v, want %v", p.BatchID, s.Metrics, wantMetrics)
		}
		if !strings.Contains(s.LatestOffset, `"lagged"`) {
			t.Fatalf("batch %d: latest offset %q", p.BatchID, s.LatestOffset)
		}
	}
	if !behind {
		t.Fatal("no batch was behind: the limit should have left records for later")
	}
	if last := reports[len(reports)-1].Sources[0]; last.Metrics["maxOffsetsBehindLatest"] != "0" {
		t.Fatalf("the last batch is behind: %v", last.Metrics)
	}
	// During the last batch, the gauge is its lag; once the query
	// ended, it is gone.
	for i := range 3 {
		want := fmt.Sprintf(`streamgen_source_lag_records{partition="lagged/%d",query="lagged",source="%s"} 0`, i, reports[0].Sources[0].Description)
		if !strings.Contains(during.last, want) {
			t.Errorf("the metrics lack %s", want)
		}
	}
	if text := scrape(metrics); strings.Contains(text, "streamgen_source_lag_records{") {
		t.Errorf("the lag of the query that ended is still exported:\n%s", text)
	}
}

// scrapeEachBatch is a listener, given after a Metrics, that scrapes it
// once each batch's report has reached it: last is the last batch's.
type scrapeEachBatch struct {
	m    *observe.Metrics
	last string
}

func (s *scrapeEachBatch) OnQueryProgress(runtime.QueryProgress) { s.last = scrape(s.m) }

// scrape returns the metrics as Prometheus reads them, in the text format.
func scrape(m *observe.Metrics) string {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}
