package observe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// Server serves, on one address, what a program's queries show: their
// status page at /, their Prometheus metrics at /metrics (with the Go
// runtime's and the process's), their state at /state/ (StateHandler),
// and the Go profiler at /debug/pprof/.
// Each query it shows is started with Watch. Safe for concurrent use.
type Server struct {
	Page    *StatusPage
	Metrics *Metrics
	State   *StateHandler
	mux     *http.ServeMux
	srv     *http.Server
	addr    net.Addr
	served  chan struct{}
}

// Serve listens on addr ("127.0.0.1:8080"; ":8080" for every interface;
// port 0 picks a free one, which Addr tells) and serves the status page,
// the metrics and the profiler there, from a goroutine of its own, until
// Close:
//
//	srv, err := observe.Serve("127.0.0.1:8080")
//	if err != nil { ... }
//	defer srv.Close()
//	q, err := typed.WriteTo(s, sink).Start(ctx, runtime.Checkpoint(dir), srv.Watch())
//
// Everything it serves is readable by whoever reaches the address: give
// it a loopback address, or wrap Handler with authentication of your own
// and serve that instead. opts are the status page's.
func Serve(addr string, opts ...StatusPageOption) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("streamgen: serve the status page and metrics: %w", err)
	}
	s := NewServer(opts...)
	s.addr = ln.Addr()
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		// Serve returns ErrServerClosed at Close; a failed Accept ends the
		// serving, not the queries.
		s.srv.Serve(ln)
	}()
	return s, nil
}

// NewServer returns a Server that does not listen: mount Handler in a
// server of your own. opts are the status page's.
func NewServer(opts ...StatusPageOption) *Server {
	s := &Server{Page: NewStatusPage(opts...), Metrics: NewMetrics(), State: NewStateHandler(), mux: http.NewServeMux()}
	s.mux.Handle("/metrics", s.Metrics.Handler())
	s.mux.Handle("/state/", s.State)
	s.mux.HandleFunc("/debug/pprof/", pprof.Index)
	s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s.mux.Handle("/", s.Page)
	return s
}

// Watch is the option that shows a query here: pass it to the query's
// Start (or to each query a program starts).
func (s *Server) Watch() runtime.Option {
	return runtime.Options(runtime.Listener(s.Page), runtime.Listener(s.Metrics), runtime.Listener(s.State))
}

// Handle serves h at pattern (http.ServeMux's) beside the rest: a
// kafka.App's StateHandler at "/app/", say.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Handler serves the status page, the metrics, the state and the
// profiler.
func (s *Server) Handler() http.Handler { return s.mux }

// Addr is the address Serve listens on (nil for NewServer's).
func (s *Server) Addr() net.Addr { return s.addr }

// URL is the status page's address as a browser on this machine opens it:
// a listener on every interface is at localhost ("" for NewServer's).
func (s *Server) URL() string {
	if s.addr == nil {
		return ""
	}
	host, port, err := net.SplitHostPort(s.addr.String())
	if err != nil {
		return "http://" + s.addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// Close stops serving: it waits up to a second for the requests in
// flight, then drops them. The queries it watched go on.
func (s *Server) Close() error {
	if s.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.served
	return err
}
