package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
)

// Reads of an App's state from any instance: the instance that gets the
// request finds the key's partition and answers from its own task of it,
// or forwards the request to the partition's owner, whose address the
// group's assignment gives (never one the request names); with stale=true
// a standby of the partition may answer from its copy.

// forwardedHeader marks a request an instance forwarded: it is answered
// where it arrives, never forwarded again.
const forwardedHeader = "X-Streamgen-Forwarded"

// AppStateAnswer is what a read of an App's state returns: the rows, the
// batch they reflect, and where they were read.
type AppStateAnswer struct {
	runtime.StateAnswer
	// Partition is the key's partition; Instance the address of the
	// instance that read it, and Standby whether that was a standby's
	// copy (stale=true), which may be behind the owner's.
	Partition int32  `json:"partition"`
	Instance  string `json:"instance,omitempty"`
	Standby   bool   `json:"standby,omitempty"`
}

// StateHandler serves reads of the App's state, as JSON, from any
// instance:
//
//	GET /state/                                 the instance's Status
//	GET /state/{operator}/{variable}?key=K      key K's entries in a variable
//	GET /state/{operator}?key=K                 key K's entries in every variable
//
// as observe.StateHandler serves a query's (operator, variable and key
// are named the same way), answering an AppStateAnswer. The key's
// partition is the one Kafka's default partitioner gives the key's
// encoding (a string key's bytes: the partition a producer gives a
// record keyed by it), or AppOptions.KeyPartition's; a windowed
// aggregation's key ({"window": ..., "key": ...}) is in the partition
// of its key, whatever its window, and so is a grouping set's ({"set":
// ..., "key": ...}); sliding and cumulative windows kept by slices are
// read by their key alone, whose row holds the slices. The instance
// that owns the partition answers: this one, or the one it forwards the
// request to, at the address the group's assignment gives it.
// stale=true lets a standby of the partition answer from its copy,
// which may be behind (the answer says so, with the batch it reflects).
// A read while the partition moves gets 503 with Retry-After.
//
// Serve it on AdvertisedAddr (an http.Server of the program's, which may
// wrap it with authentication, and TLS). Safe for concurrent use.
func (a *App) StateHandler() http.Handler { return http.HandlerFunc(a.serveState) }

func (a *App) serveState(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		observe.WriteStateRefusal(w, http.StatusMethodNotAllowed, errors.New("state is read with GET"))
		return
	}
	parts, status, err := observe.StatePath(r)
	if err != nil {
		observe.WriteStateRefusal(w, status, err)
		return
	}
	if parts == nil {
		observe.WriteStateAnswer(w, a.Status())
		return
	}
	params := r.URL.Query()
	if !params.Has("key") {
		observe.WriteStateRefusal(w, http.StatusBadRequest, errors.New("an App's state is read by key: give key="))
		return
	}
	req := runtime.StateRequest{Operator: parts[0], Key: observe.KeyParam(params.Get("key"))}
	if len(parts) == 2 {
		req.Variable = parts[1]
	}
	if l := params.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 {
			observe.WriteStateRefusal(w, http.StatusBadRequest, fmt.Errorf("limit=%q is not a positive number", l))
			return
		}
		req.Limit = n
	}
	stale := params.Get("stale") == "true"
	// A read forwarded to its partition's owner is answered there or not
	// at all; one forwarded "unplaced" (by an instance with no task to
	// place the key) may go once more, to the owner.
	forwarded := r.Header.Get(forwardedHeader) != "" && r.Header.Get(forwardedHeader) != "unplaced"
	if a.statePartitions.Load() == 0 {
		unavailable(w, errors.New("the App has not joined its group yet: try again"))
		return
	}

	// The key's encoding, from any task of this instance (every task runs
	// the same pipeline), or the partition given by the forwarder.
	p, err := a.keyPartition(req, params.Get("partition"), forwarded)
	if errors.Is(err, errNoTask) {
		a.forwardAny(w, r)
		return
	}
	if err != nil {
		observe.WriteStateError(w, err)
		return
	}
	if ans, ok, err := a.readLocal(p, req, stale); ok || err != nil {
		if err != nil {
			observe.WriteStateError(w, err)
			return
		}
		observe.WriteStateAnswer(w, ans)
		return
	}
	if forwarded {
		unavailable(w, fmt.Errorf("partition %d is not on this instance (it moved): try again", p))
		return
	}
	info := a.assignment.Load()
	targets := []assignMember{}
	if m, ok := info.owner(p); ok {
		targets = append(targets, m)
	}
	if stale {
		targets = append(targets, info.standbysOf(p)...)
	}
	var failed []error
	for _, m := range targets {
		if m.Addr == "" || m.Addr == a.opts.AdvertisedAddr {
			continue
		}
		err := a.forward(w, r, m.Addr, p)
		if err == nil {
			return
		}
		failed = append(failed, err)
	}
	unavailable(w, a.forwardFailed(fmt.Errorf("partition %d has no owner that answers now (it moves, or its owner has no AdvertisedAddr): try again", p), failed))
}

// forwardFailed is err, the answer to a read that no instance answered,
// with why each one it was sent to did not (a connection refused, a TLS
// failure, a timeout, a 503), so that a wrong StateScheme or a firewall
// is not taken for a rebalance that never ends; the first of these in a
// minute is logged too.
func (a *App) forwardFailed(err error, failed []error) error {
	if len(failed) == 0 {
		return err
	}
	causes := errors.Join(failed...)
	now := time.Now().UnixNano()
	if last := a.forwardLogged.Load(); now-last >= int64(time.Minute) && a.forwardLogged.CompareAndSwap(last, now) {
		slog.Warn("streamgen: kafka app: a read of state could not be forwarded", "group", a.opts.Group, "error", causes)
	}
	return fmt.Errorf("%w (%s)", err, strings.ReplaceAll(causes.Error(), "\n", "; "))
}

// errStandbyEmpty is readStandby's error for a standby whose store holds
// no committed batch yet.
var errStandbyEmpty = errors.New("the standby holds no batch yet")

// errNoTask is keyPartition's error on an instance that runs no task.
var errNoTask = errors.New("no task runs here")

// keyPartition returns the partition of req's key.
func (a *App) keyPartition(req runtime.StateRequest, given string, forwarded bool) (int32, error) {
	partitions := a.statePartitions.Load()
	if forwarded && given != "" {
		p, err := strconv.ParseInt(given, 10, 32)
		if err != nil || p < 0 || int32(p) >= partitions {
			return 0, fmt.Errorf("%w: partition=%q", runtime.ErrBadStateKey, given)
		}
		return int32(p), nil
	}
	a.mu.Lock()
	var q *runtime.Query
	for _, tq := range a.queries {
		q = tq
		break
	}
	a.mu.Unlock()
	if q == nil {
		return 0, errNoTask
	}
	key, err := q.PartitionKey(req.Operator, req.Key)
	if err != nil {
		return 0, err
	}
	if a.opts.KeyPartition != nil {
		p := a.opts.KeyPartition(key, partitions)
		if p < 0 || p >= partitions {
			return 0, fmt.Errorf("streamgen: kafka app: KeyPartition gave partition %d of %d", p, partitions)
		}
		return p, nil
	}
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic(a.opts.Topics[0]).Partition(&kgo.Record{Key: key}, int(partitions))), nil
}

// readLocal answers from this instance's task of p, or, for a stale
// read, its standby of p; ok is false when it has neither.
func (a *App) readLocal(p int32, req runtime.StateRequest, stale bool) (AppStateAnswer, bool, error) {
	a.mu.Lock()
	q := a.queries[p]
	var store *runtime.Store
	if q == nil && stale {
		if sb := a.standbys[p]; sb != nil && !sb.stopping {
			store = sb.store
		}
	}
	a.mu.Unlock()
	ans := AppStateAnswer{Partition: p, Instance: a.opts.AdvertisedAddr}
	switch {
	case q != nil:
		var err error
		ans.StateAnswer, err = q.LookupState(req)
		return ans, true, err
	case store != nil:
		ans.Standby = true
		err := a.readStandby(store, p, req, &ans)
		if errors.Is(err, runtime.ErrStoreClosed) || errors.Is(err, errStandbyEmpty) {
			// It stopped meanwhile, or holds no batch yet (it has
			// just started, or is rebuilding): the owner, or another
			// standby, answers.
			return ans, false, nil
		}
		return ans, true, err
	}
	return ans, false, nil
}

// readStandby reads req from a standby's store: the key is encoded by a
// task of this instance, if it runs one, else from what the standby's
// checkpoint says of it (runtime.CheckpointReader.ParseKey: a basic key,
// or a record key as its rows show it, by its fields' Go names or JSON
// names, in a window or a grouping set or neither).
func (a *App) readStandby(store *runtime.Store, p int32, req runtime.StateRequest, ans *AppStateAnswer) error {
	r, err := store.ReadSnapshot()
	if err != nil {
		return err
	}
	defer r.Close()
	if _, ok, err := r.Meta(); err != nil {
		return err
	} else if !ok {
		return errStandbyEmpty
	}
	if _, ok, err := r.Progress(); err != nil {
		return err
	} else if !ok {
		return errStandbyEmpty
	}
	a.mu.Lock()
	var q *runtime.Query
	for _, tq := range a.queries {
		q = tq
		break
	}
	a.mu.Unlock()
	var key []byte
	if q != nil {
		// The other task's checkpoint may store record keys in another
		// encoding than the standby's: the key goes through the encoding
		// every checkpoint of the pipeline reads.
		if key, err = q.TransferKey(req.Operator, req.Key); err != nil {
			return err
		}
		if key, err = r.StoreKey(req.Operator, key); err != nil {
			return err
		}
	} else if key, err = r.ParseKey(req.Operator, req.Key); err != nil {
		return err
	}
	ans.StateAnswer, err = r.Lookup(req, key)
	ans.Query = a.opts.Group + "/" + strconv.Itoa(int(p))
	return err
}

// forward sends the request to addr, an instance the group's assignment
// names, for partition p, and copies its answer; it returns why not when
// addr does not answer, or answers 503.
func (a *App) forward(w http.ResponseWriter, r *http.Request, addr string, p int32) error {
	u := *r.URL
	q := u.Query()
	q.Set("partition", strconv.Itoa(int(p)))
	u.RawQuery = q.Encode()
	return a.send(w, r, addr, &u, a.opts.AdvertisedAddr)
}

// send sends the request r, at URL u's path and query, to addr, marked as
// forwarded by mark, with the caller's credentials (for the owner's own
// checks), and copies the answer; it returns why not when addr does not
// answer, or answers 503.
func (a *App) send(w http.ResponseWriter, r *http.Request, addr string, u *url.URL, mark string) error {
	scheme := a.opts.StateScheme
	if scheme == "" {
		scheme = "http"
	}
	target := url.URL{Scheme: scheme, Host: addr, Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return fmt.Errorf("forward to %s: %w", addr, err)
	}
	req.Header.Set(forwardedHeader, mark)
	for _, h := range []string{"Authorization", "Cookie"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := a.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("forward to %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		// It moved meanwhile: another target, or 503 here.
		var refusal struct{ Error string }
		json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&refusal)
		return fmt.Errorf("forward to %s: %s: %s", addr, resp.Status, refusal.Error)
	}
	for _, h := range []string{"Content-Type", "Cache-Control", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
	return nil
}

// forwardAny forwards a request this instance cannot place (it runs no
// task to encode the key with) to an instance that owns partitions, each
// distinct address once, marked so that it is not forwarded again; 503
// when none answers.
func (a *App) forwardAny(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(forwardedHeader) == "" {
		info := a.assignment.Load()
		tried := map[string]bool{a.opts.AdvertisedAddr: true}
		var failed []error
		for p := range a.statePartitions.Load() {
			m, ok := info.owner(p)
			if !ok || m.Addr == "" || tried[m.Addr] {
				continue
			}
			tried[m.Addr] = true
			u := *r.URL
			q := u.Query()
			q.Del("partition")
			u.RawQuery = q.Encode()
			err := a.send(w, r, m.Addr, &u, "unplaced")
			if err == nil {
				return
			}
			failed = append(failed, err)
		}
		if len(failed) > 0 {
			unavailable(w, a.forwardFailed(errors.New("no instance runs a task to place the key now (they start, or restore): try again"), failed))
			return
		}
	}
	unavailable(w, errors.New("no instance runs a task to place the key now (they start, or restore): try again"))
}

// httpClient is the client that forwards reads.
func (a *App) httpClient() *http.Client {
	if a.opts.StateClient != nil {
		return a.opts.StateClient
	}
	return forwardClient
}

// forwardClient forwards reads by default: it follows no redirect (an
// instance answers, or the read fails), so a request goes only to the
// address the group's assignment gave.
var forwardClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// unavailable answers 503, to try again in a second.
func unavailable(w http.ResponseWriter, err error) {
	observe.WriteStateRefusal(w, http.StatusServiceUnavailable, err)
}

// ErrNoTask is Locate's error on an instance that runs no task yet: the
// encoding of a key, which places it, comes from a task's pipeline.
var ErrNoTask = errors.New("streamgen: kafka app: no task runs on this instance yet")

// KeyLocation is where a key's state lives in an App, as Kafka Streams'
// KeyQueryMetadata: its partition, and the advertised addresses of the
// instance that owns it and of its standbys, as the group's last
// assignment says (Owner is empty while the partition moves: it has no
// owner, or its owner has not started its task, or has no
// AdvertisedAddr). Local is true when this instance runs the partition's
// task.
type KeyLocation struct {
	Partition int32    `json:"partition"`
	Owner     string   `json:"owner,omitempty"`
	Standbys  []string `json:"standbys,omitempty"`
	Local     bool     `json:"local,omitempty"`
}

// Locate returns where the state of req's key lives, for a program that
// serves reads of state its own way (gRPC, say) rather than with
// StateHandler: it reads what this instance holds with ReadState and
// sends the rest to Owner (or, for a read that may be behind, to a
// standby). The key is placed as StateHandler places it (see there);
// req.Variable and req.Limit are not used. It fails with ErrNoTask
// while this instance runs no task, and with runtime.ErrBadStateKey (or
// runtime.ErrUnknownState) for a key or operator the pipeline does not
// have. Safe for concurrent use.
func (a *App) Locate(req runtime.StateRequest) (KeyLocation, error) {
	p, err := a.placeKey(req)
	if err != nil {
		return KeyLocation{}, err
	}
	loc := KeyLocation{Partition: p}
	info := a.assignment.Load()
	a.mu.Lock()
	loc.Local = a.queries[p] != nil
	a.mu.Unlock()
	// Assigned here but not running yet (restoring, or starting again):
	// moving, for a reader, as when it has no owner.
	if m, ok := info.owner(p); ok && (loc.Local || m.Addr != a.opts.AdvertisedAddr) {
		loc.Owner = m.Addr
	}
	for _, m := range info.standbysOf(p) {
		if m.Addr != "" {
			loc.Standbys = append(loc.Standbys, m.Addr)
		}
	}
	return loc, nil
}

// ReadState reads req on this instance: from its task of the key's
// partition or, with stale, from its standby of it, whose copy may be
// behind (the answer says so). ok is false when this instance holds
// neither: Locate says where the key lives. Safe for concurrent use.
func (a *App) ReadState(req runtime.StateRequest, stale bool) (ans AppStateAnswer, ok bool, err error) {
	p, err := a.placeKey(req)
	if err != nil {
		return AppStateAnswer{}, false, err
	}
	return a.readLocal(p, req, stale)
}

// placeKey returns the partition of req's key, for Locate and ReadState.
func (a *App) placeKey(req runtime.StateRequest) (int32, error) {
	if a.statePartitions.Load() == 0 {
		return 0, ErrNoTask
	}
	p, err := a.keyPartition(req, "", false)
	if errors.Is(err, errNoTask) {
		return 0, ErrNoTask
	}
	return p, err
}
