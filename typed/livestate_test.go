package typed_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// liveProcessor keeps, per user, a click count (value), the pages in
// order (list) and a count per page (map).
type liveProcessor struct {
	n       *typed.ValueState[int64]
	pages   *typed.ListState[string]
	perPage *typed.MapState[string, int64]
}

func (p *liveProcessor) Init(h *typed.Handle) error {
	p.n = typed.NewValueState[int64](h, "n")
	p.pages = typed.NewListState[string](h, "pages")
	p.perPage = typed.NewMapState[string, int64](h, "perPage")
	return nil
}

func (p *liveProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(fixtures.UserCount)) error {
	n, _, err := p.n.Get(ctx)
	if err != nil {
		return err
	}
	for c := range rows {
		n++
		if err := p.pages.AppendValue(ctx, c.Page); err != nil {
			return err
		}
		k, _, err := p.perPage.GetValue(ctx, c.Page)
		if err != nil {
			return err
		}
		if err := p.perPage.UpdateValue(ctx, c.Page, k+1); err != nil {
			return err
		}
	}
	emit(fixtures.UserCount{User: user, Count: n})
	return p.n.Update(ctx, n)
}

// liveRounds are the rows of each batch of the live-state tests: one
// round a batch.
func liveRounds() [][]fixtures.Click {
	users := []string{"ann", "bob", "cat", "dan"}
	var rounds [][]fixtures.Click
	for r := range 6 {
		var round []fixtures.Click
		for i := range 5 + r {
			round = append(round, fixtures.Click{User: users[(i*7+r)%len(users)], Page: fmt.Sprintf("p%d", (i+r)%3), Time: at(r*10 + i)})
		}
		rounds = append(rounds, round)
	}
	return rounds
}

// userState is what a plain loop says a user's state is.
type userState struct {
	n       int64
	pages   []string
	perPage map[string]int64
}

// expectedAfter computes, with a plain loop, every user's state after the
// first n rounds.
func expectedAfter(rounds [][]fixtures.Click, n int) map[string]*userState {
	out := map[string]*userState{}
	for _, round := range rounds[:n] {
		for _, c := range round {
			s := out[c.User]
			if s == nil {
				s = &userState{perPage: map[string]int64{}}
				out[c.User] = s
			}
			s.n++
			s.pages = append(s.pages, c.Page)
			s.perPage[c.Page]++
		}
	}
	return out
}

// TestLiveStateReads reads a running transformWithState query's value, list
// and map state while it runs, with readers on other goroutines all along:
// each answer is the state of the batch it names, as a plain loop over
// the rows of that batch and those before computes it, never a batch
// half applied.
func TestLiveStateReads(t *testing.T) {
	rounds := liveRounds()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	out := typed.TransformWithState(byUser, &liveProcessor{}, typed.TimeModeNone, typed.Update)
	var committed atomic.Int64
	committed.Store(-1)
	listener := progressFunc(func(p runtime.QueryProgress) { committed.Store(p.BatchID) })
	cp := newCheckpoint()
	q, err := typed.WriteTo(out, typed.NewMemorySink[fixtures.UserCount]()).OutputMode(typed.Update).
		Start(context.Background(), cp.opts(runtime.Name("live"), runtime.Listener(listener))...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	v := func(name string) typed.StateVariable {
		return typed.StateVariable{Operator: "*typed_test.liveProcessor", Variable: name}
	}

	// check compares what the query says of user with the loop's state
	// after the batch it names.
	check := func(user string) error {
		n, ok, b1, err := typed.ReadValue[int64](q, v("n"), user)
		if err != nil {
			return err
		}
		pages, b2, err := typed.ReadList[string](q, v("pages"), user)
		if err != nil {
			return err
		}
		perPage, b3, err := typed.ReadMap[string, int64](q, v("perPage"), user)
		if err != nil {
			return err
		}
		for _, read := range []struct {
			batch int64
			ok    func(*userState) bool
			what  string
		}{
			{b1, func(s *userState) bool { return ok == (s != nil) && (s == nil || s.n == n) }, fmt.Sprint("n ", n, ok)},
			{b2, func(s *userState) bool {
				return s == nil && len(pages) == 0 || s != nil && slices.Equal(s.pages, pages)
			}, fmt.Sprint("pages ", pages)},
			{b3, func(s *userState) bool {
				return s == nil && len(perPage) == 0 || s != nil && maps.Equal(s.perPage, perPage)
			}, fmt.Sprint("perPage ", perPage)},
		} {
			if read.batch < -1 || read.batch >= int64(len(rounds)) {
				return fmt.Errorf("%s: batch %d", user, read.batch)
			}
			if want := expectedAfter(rounds, int(read.batch+1))[user]; !read.ok(want) {
				return fmt.Errorf("%s at batch %d: read %s, want %+v", user, read.batch, read.what, want)
			}
		}
		return nil
	}

	stop := make(chan struct{})
	var readers sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan error, 4)
	for _, user := range []string{"ann", "bob", "cat", "dan"} {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := check(user); err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		})
	}
	for i, round := range rounds {
		m.Add(round...)
		waitFor(t, fmt.Sprintf("batch %d", i), func() bool { return committed.Load() >= int64(i) })
	}
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Fatal("no read ran")
	}
	// Once it has caught up, every user's state is the loop's over
	// everything.
	want := expectedAfter(rounds, len(rounds))
	for user, s := range want {
		n, ok, batch, err := typed.ReadValue[int64](q, v("n"), user)
		if err != nil || !ok || n != s.n || batch != int64(len(rounds)-1) {
			t.Fatalf("%s: n %d, %v, batch %d, %v; want %d at batch %d", user, n, ok, batch, err, s.n, len(rounds)-1)
		}
	}
	if _, ok, _, err := typed.ReadValue[int64](q, v("n"), "nobody"); err != nil || ok {
		t.Fatalf("a key with no state: ok %v, %v", ok, err)
	}
	if err := q.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := typed.ReadValue[int64](q, v("n"), "ann"); !errors.Is(err, runtime.ErrStoreClosed) {
		t.Fatalf("a read after Stop: %v, want ErrStoreClosed", err)
	}
}

// TestLiveStateErrors: an operator or variable the query does not have,
// and a key that is not of the operator's key type, are errors that say
// what there is; the operator may be named by its index; a record key is
// given as its fields.
func TestLiveStateErrors(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("ann", 1), click("bob", 2), click("ann", 3))
	byPage := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) fixtures.PageKey { return fixtures.PageKey{User: c.User, Page: c.Page} })
	count := func(k fixtures.PageKey, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		return countClicks(k.User, rows, st)
	}
	var committed atomic.Int64
	committed.Store(-1)
	cp := newCheckpoint()
	q, err := typed.WriteTo(typed.MapGroupsWithState(byPage, typed.NoTimeout, count), typed.NewMemorySink[fixtures.UserCount]()).OutputMode(typed.Update).
		Start(context.Background(), cp.opts(runtime.Listener(progressFunc(func(p runtime.QueryProgress) { committed.Store(p.BatchID) })))...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	waitFor(t, "the first batch", func() bool { return committed.Load() >= 0 })

	key := fixtures.PageKey{User: "ann", Page: click("ann", 1).Page}
	c, ok, batch, err := typed.ReadValue[fixtures.Counter](q, typed.StateVariable{Operator: "0", Variable: "state"}, key)
	if err != nil || !ok || c.Count != 2 || batch != 0 {
		t.Fatalf("ann's counter by index: %+v %v batch %d %v", c, ok, batch, err)
	}
	for _, tc := range []struct {
		req  runtime.StateRequest
		want error
		says string
	}{
		{runtime.StateRequest{Operator: "nosuch", Variable: "state"}, runtime.ErrUnknownState, `no operator named "nosuch" (the query has 0 "`},
		{runtime.StateRequest{Operator: "7", Variable: "state"}, runtime.ErrUnknownState, "no operator 7"},
		{runtime.StateRequest{Operator: "0", Variable: "nosuch"}, runtime.ErrUnknownState, `has no state variable "nosuch" (it has "state")`},
		{runtime.StateRequest{Operator: "0", Variable: "state", Key: []byte(`"ann"`)}, runtime.ErrBadStateKey, "is not a key of operator"},
		{runtime.StateRequest{Operator: "0", Variable: "state", Key: []byte(`{"User":`)}, runtime.ErrBadStateKey, "is not a key of operator"},
	} {
		_, err := q.LookupState(tc.req)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v; want %v saying %q", tc.req, err, tc.want, tc.says)
		}
	}
	// Every key, up to a limit.
	all, err := q.LookupState(runtime.StateRequest{Operator: "0"})
	if err != nil || len(all.Rows) != 2 || all.More {
		t.Fatalf("every key: %+v, %v", all, err)
	}
	one, err := q.LookupState(runtime.StateRequest{Operator: "0", Limit: 1})
	if err != nil || len(one.Rows) != 1 || !one.More {
		t.Fatalf("limit 1: %+v, %v", one, err)
	}
}

// progressFunc is a listener of progress reports.
type progressFunc func(runtime.QueryProgress)

func (f progressFunc) OnQueryProgress(p runtime.QueryProgress) { f(p) }
