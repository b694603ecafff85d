package cli

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/streamgen/streamgen/runtime/observe"
)

// metricsServer serves a query's metrics for -metrics, from its start to
// its end.
type metricsServer struct {
	Metrics *observe.Metrics
	addr    net.Addr
	srv     *http.Server
	served  chan struct{} // closed when Serve has returned
}

// serveMetrics listens on addr and serves a new observe.Metrics at
// /metrics, in a goroutine that close stops.
func serveMetrics(addr string) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics: %w", err)
	}
	m := observe.NewMetrics()
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	s := &metricsServer{Metrics: m, addr: ln.Addr(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, served: make(chan struct{})}
	go func() {
		defer close(s.served)
		// Serve returns ErrServerClosed at close; an Accept that fails
		// ends the serving, not the query.
		s.srv.Serve(ln)
	}()
	return s, nil
}

// url is where the metrics are served.
func (s *metricsServer) url() string { return "http://" + s.addr.String() + "/metrics" }

// close stops serving, closing the connections open, and waits for the
// server's goroutine.
func (s *metricsServer) close() {
	s.srv.Close()
	<-s.served
}
