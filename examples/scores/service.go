package main

import (
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// score is the scoring service's model: a score from 0 to 99.99 that
// depends on every field of the visit and on nothing else, so that a test
// can compute what the service answers.
func score(v *Visit) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%d", v.EventID, v.User, v.Page, v.Seconds)
	return float64(h.Sum64()%10000) / 100
}

// scoringService stands for an external scoring service: an
// HTTP server on loopback that answers POST /score, with a visit as JSON,
// with {"score": score(visit)} after latency. It counts the calls and
// the most it has had in flight at once. It is safe for concurrent use.
type scoringService struct {
	url     string
	latency time.Duration
	server  *http.Server

	calls, inFlight, maxInFlight atomic.Int64
}

// startScoringService starts the service on a free port of 127.0.0.1.
// wrap, if not nil, wraps its handler (tests hold calls with it).
func startScoringService(latency time.Duration, wrap func(http.Handler) http.Handler) (*scoringService, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the scoring service: %w", err)
	}
	s := &scoringService{url: "http://" + listener.Addr().String() + "/score", latency: latency}
	var handler http.Handler = http.HandlerFunc(s.serveScore)
	if wrap != nil {
		handler = wrap(handler)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /score", handler)
	s.server = &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}
	// Serve returns at Close, or when the listener fails; then the
	// calls fail, and say why.
	go s.server.Serve(listener)
	return s, nil
}

func (s *scoringService) serveScore(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for most := s.maxInFlight.Load(); n > most && !s.maxInFlight.CompareAndSwap(most, n); most = s.maxInFlight.Load() {
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return // the client is gone
	}
	var v Visit
	if err := v.UnmarshalJSON(body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if s.latency > 0 {
		wait := time.NewTimer(s.latency)
		defer wait.Stop()
		select {
		case <-wait.C:
		case <-r.Context().Done():
			return // the caller gave up
		}
	}
	reply := scoreReply{Score: score(&v)}
	answer, err := reply.MarshalJSON()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(answer)
}

// Close stops the service at once: calls in flight fail.
func (s *scoringService) Close() error { return s.server.Close() }
