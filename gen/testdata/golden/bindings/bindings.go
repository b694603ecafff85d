package bindings

import (
	"iter"
	"time"

	"github.com/streamgen/streamgen/typed"
)

// Visit is an input row with a key and an event time.
//
//streamgen:record
type Visit struct {
	Page string    `stream:"key"`
	At   time.Time `stream:"eventtime"`
	User string
}

// Hits is per-page state.
//
//streamgen:record
type Hits struct{ N int64 }

// PageHits is an output row.
//
//streamgen:record
type PageHits struct {
	Page string
	N    int64
}

// count counts visits per page.
//
//streamgen:mapGroupsWithState
func count(page string, visits iter.Seq[Visit], state *typed.GroupState[Hits]) (PageHits, error) {
	h, _ := state.Get()
	for range visits {
		h.N++
	}
	state.Update(h)
	return PageHits{Page: page, N: h.N}, nil
}

// byUser emits each user's visit count when the watermark passes their
// last visit by a minute.
//
//streamgen:flatMapGroupsWithState mode=append timeout=event watermark=10s key=User name=UserTotals
func byUser(user string, visits iter.Seq[Visit], state *typed.GroupState[Hits], emit func(PageHits)) error {
	if state.HasTimedOut() {
		h, _ := state.Get()
		emit(PageHits{Page: user, N: h.N})
		state.Remove()
		return nil
	}
	h, _ := state.Get()
	last := time.Time{}
	for v := range visits {
		h.N++
		if v.At.After(last) {
			last = v.At
		}
	}
	state.Update(h)
	return state.SetTimeoutTimestamp(last.Add(time.Minute))
}

// Ping is an input row whose event time is an integer of milliseconds.
//
//streamgen:record
type Ping struct {
	Host   string `stream:"key"`
	Millis int64  `stream:"eventtime,unit=ms"`
}

// HostPings is an output row: a host's pings so far.
//
//streamgen:record
type HostPings struct {
	Host string
	N    int64
}

// pings counts each host's pings, in Update mode, and forgets a host a
// second after its last ping.
//
//streamgen:flatMapGroupsWithState mode=update timeout=event watermark=1s
func pings(host string, rows iter.Seq[Ping], state *typed.GroupState[Hits], emit func(HostPings)) error {
	if state.HasTimedOut() {
		state.Remove()
		return nil
	}
	h, _ := state.Get()
	var last int64
	for p := range rows {
		h.N++
		last = max(last, p.Millis)
	}
	state.Update(h)
	emit(HostPings{Host: host, N: h.N})
	return state.SetTimeoutTimestamp(time.UnixMilli(last).Add(time.Second))
}
