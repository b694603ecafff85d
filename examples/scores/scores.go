package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"slices"
	"sync"

	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Visit is an input row: a user's visit of a page, which the scoring
// service scores.
//
//streamgen:record
type Visit struct {
	EventID int64  `json:"event_id"`
	User    string `json:"user" stream:"required"`
	Page    string `json:"page"`
	Seconds int64  `json:"seconds"` // time on the page
}

// UserScore is a user's highest score so far: the output row.
//
//streamgen:record
type UserScore struct {
	User  string  `json:"user"`
	Score float64 `json:"score"`
}

// scoreReply is the scoring service's answer to a call.
//
//streamgen:record
type scoreReply struct {
	Score float64 `json:"score" stream:"required"`
}

// gatherProcessor is Spark 4's asynchronous gather processor: for each user
// with new visits, it calls the scoring service once per visit, all of
// the user's calls at once, and keeps the highest score in a value state.
// It emits the user's highest score so far (Update mode).
//
// The calls run on goroutines of the handler's own, with the handler's
// ctx, which the query cancels when it stops: a stop abandons the calls
// in flight. The handlers of different users may run at once
// (-concurrency); the processor's fields are set in Init and then only
// read, and its http.Client is safe for concurrent use.
type gatherProcessor struct {
	url    string // the scoring service's
	client *http.Client
	best   *typed.ValueState[float64]
}

// maxIdleCalls is how many connections to the scoring service the client
// keeps open between calls: enough for every call of 32 concurrent
// handlers of a few rows, so that calls reuse connections rather than
// open new ones.
const maxIdleCalls = 256

func (p *gatherProcessor) Init(h *typed.Handle) error {
	p.best = typed.NewValueState[float64](h, "best_score")
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil // the service is on loopback
	transport.MaxIdleConnsPerHost = maxIdleCalls
	p.client = &http.Client{Transport: transport}
	return nil
}

func (p *gatherProcessor) HandleInputRows(ctx context.Context, user string, visits iter.Seq[Visit], _ typed.TimerValues, emit func(UserScore)) error {
	rows := slices.Collect(visits) // visits is read on the handler's goroutine only
	// The first call that fails cancels the others, and its error is the
	// handler's.
	calls, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	scores := make([]float64, len(rows))
	var wg sync.WaitGroup
	for i := range rows {
		wg.Go(func() {
			s, err := p.score(calls, &rows[i])
			if err != nil {
				cancel(err)
				return
			}
			scores[i] = s
		})
	}
	wg.Wait()
	if calls.Err() != nil {
		return context.Cause(calls)
	}
	best, ok, err := p.best.Get(ctx)
	if err != nil {
		return err
	}
	for _, s := range scores {
		if !ok || s > best {
			best, ok = s, true
		}
	}
	if err := p.best.Update(ctx, best); err != nil {
		return err
	}
	emit(UserScore{User: user, Score: best})
	return nil
}

// score calls the scoring service for v.
func (p *gatherProcessor) score(ctx context.Context, v *Visit) (float64, error) {
	body, err := v.MarshalJSON()
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("event %d: the scoring service's answer: %w", v.EventID, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("event %d: the scoring service answered %s: %s", v.EventID, resp.Status, bytes.TrimSpace(data))
	}
	var reply scoreReply
	if err := reply.UnmarshalJSON(data); err != nil {
		return 0, fmt.Errorf("event %d: the scoring service's answer: %w", v.EventID, err)
	}
	return reply.Score, nil
}

// HandleExpiredTimer is never called: the processor runs with
// TimeModeNone and registers no timer.
func (p *gatherProcessor) HandleExpiredTimer(context.Context, string, typed.TimerValues, typed.ExpiredTimerInfo, func(UserScore)) error {
	return nil
}

// Close closes the connections to the scoring service.
func (p *gatherProcessor) Close() error {
	p.client.CloseIdleConnections()
	return nil
}

// bestScores groups the visits by user and keeps each user's highest
// score, from the scoring service at url.
func bestScores(visits typed.Stream[Visit], url string, concurrency int) typed.Stream[UserScore] {
	byUser := typed.GroupByKey(visits, func(v *Visit) string { return v.User })
	return typed.TransformWithState(byUser, &gatherProcessor{url: url}, typed.TimeModeNone, typed.Update, typed.Concurrency(concurrency))
}
