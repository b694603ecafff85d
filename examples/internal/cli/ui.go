package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
)

// statusPage serves the query's status page (observe.StatusPage) while the
// example runs, for -ui.
type statusPage struct {
	page   *observe.StatusPage
	server *http.Server
	served chan error // Serve's result
}

// serveStatusPage listens on addr and serves a status page from another
// goroutine until close; w prints where.
func serveStatusPage(addr string, w *watch) (*statusPage, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-ui: %w", err)
	}
	s := &statusPage{
		page:   observe.NewStatusPage(),
		served: make(chan error, 1),
	}
	s.server = &http.Server{Handler: s.page, ReadHeaderTimeout: 10 * time.Second}
	go func() { s.served <- s.server.Serve(ln) }()
	w.printf("status page at %s", pageURL(ln.Addr()))
	return s, nil
}

// pageURL is the page's address as a browser on this machine opens it:
// a listener on every interface (":8080") is at localhost.
func pageURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// listener is the query option that feeds the page.
func (s *statusPage) listener() runtime.Option { return runtime.Listener(s.page) }

// close stops serving: it waits up to a second for the requests in flight
// (a page's poll is one short request), then drops them.
func (s *statusPage) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.server.Shutdown(ctx); err != nil {
		s.server.Close()
	}
	if err := <-s.served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("-ui: %w", err)
	}
	return nil
}
