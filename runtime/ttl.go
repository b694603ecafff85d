package runtime

import (
	"encoding/binary"
	"fmt"
	"time"
)

// State that expires (a state variable with a time to live) is written as
//
//	0x00 value               no expiry
//	0x01 expiry(8) value     expires at expiry (as TimerInstant keeps it)
//
// and each entry with an expiry is also in the expiry index:
//
//	ttlPrefix partition(4) op(1) clock(1) expiry(8) var(1) uvarint(len(key)) key suffix
//
// so the entries that expire below an instant are one range scan per
// clock. An entry written again gets a new index entry; the old one is
// found stale (its expiry no longer matches the entry's) and dropped when
// it comes due.
const ttlPrefix = 0x22

// ExpiryClock is the clock an expiry is measured on.
type ExpiryClock uint8

const (
	// ProcessingTimeExpiry: the entry is gone once the batch's processing
	// time reaches its expiry (Spark's TTL).
	ProcessingTimeExpiry ExpiryClock = iota
	// EventTimeExpiry: the entry is gone once the watermark reaches its
	// expiry.
	EventTimeExpiry
)

// AppendExpiring appends value with its expiry (none when at is zero) in
// the layout above.
func AppendExpiring(b []byte, at time.Time, value []byte) []byte {
	if at.IsZero() {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, uint64(timerNanos(at)))
	}
	return append(b, value...)
}

// ReadExpiring splits an entry written by AppendExpiring into its expiry
// (zero for none) and value.
func ReadExpiring(b []byte) (at time.Time, value []byte, err error) {
	switch {
	case len(b) >= 1 && b[0] == 0:
		return time.Time{}, b[1:], nil
	case len(b) >= 9 && b[0] == 1:
		return time.Unix(0, int64(binary.BigEndian.Uint64(b[1:9]))).UTC(), b[9:], nil
	}
	return time.Time{}, nil, fmt.Errorf("streamgen: state entry of %d bytes does not hold an expiry", len(b))
}

// Expired reports whether an entry that expires at at (zero: never) is
// gone at now: from its expiry on.
func Expired(at, now time.Time) bool { return !at.IsZero() && !now.Before(at) }

func ttlKey(b []byte, v Var, clock ExpiryClock, at time.Time, key, suffix []byte) []byte {
	b = appendScope(b, ttlPrefix, v.Scope)
	b = append(b, byte(clock))
	b = appendInstant(b, at)
	b = append(b, v.Variable)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return append(b, suffix...)
}

// PutExpiring sets the entry (v, key, suffix) to value, expiring at at
// (zero: never) on clock, and indexes its expiry.
func (b *StateBatch) PutExpiring(v Var, key, suffix, value []byte, at time.Time, clock ExpiryClock) error {
	b.tmp = AppendExpiring(b.tmp[:0], at, value)
	if err := b.Put(v, key, suffix, b.tmp); err != nil {
		return err
	}
	if at.IsZero() {
		return nil
	}
	b.written = true
	if n := timerNanos(at); int(clock) < len(b.ttlLow) && n < b.ttlLow[clock] {
		b.ttlLow[clock] = n
	}
	b.key = ttlKey(b.key[:0], v, clock, at, key, suffix)
	if err := b.b.Set(b.key, nil, nil); err != nil {
		return fmt.Errorf("streamgen: write state: %w", err)
	}
	return nil
}

// ExpireState deletes the entries of scope that expire before or at now
// (processing time) or watermark (event time; none when it is zero),
// walking the expiry index, and returns how many it deleted. An index
// entry whose state entry was written again with another expiry, or
// deleted, is dropped.
func (b *StateBatch) ExpireState(s Scope, now, watermark time.Time) (int64, error) {
	n, err := b.expire(s, ProcessingTimeExpiry, now)
	if err != nil || watermark.IsZero() {
		return n, err
	}
	m, err := b.expire(s, EventTimeExpiry, watermark)
	return n + m, err
}

func (b *StateBatch) expire(s Scope, clock ExpiryClock, until time.Time) (int64, error) {
	lower := append(appendScope(nil, ttlPrefix, s), byte(clock))
	upper := appendInstant(append([]byte(nil), lower...), until.Add(1))
	// The batch's own index entries are not due when they all expire after
	// until, and none of this range's entries were deleted by an earlier
	// pass: then the committed index is the batch's view of the range.
	committed := int(clock) < len(b.ttlLow) && b.ttlLow[clock] > timerNanos(until)
	for _, r := range b.expired {
		if r.scope == s && r.clock == clock {
			committed = false
		}
	}
	b.expired = append(b.expired, expiredRange{s, clock})
	// The due entries, copied out of the scan: their index keys, and where
	// each one's variable, key and suffix lie in it.
	type due struct {
		start, end       int // the index key in keys
		variable         uint8
		keyStart, keyEnd int
		at               int64
	}
	var (
		all  []due
		keys []byte
	)
	err := b.scanFrom(lower, upper, committed, func(k, _ []byte) error {
		variable, keyStart, keyEnd, at, err := parseTTLKey(k, len(lower))
		if err != nil {
			return err
		}
		start := len(keys)
		keys = append(keys, k...)
		all = append(all, due{
			start: start, end: len(keys),
			variable: variable,
			keyStart: start + keyStart, keyEnd: start + keyEnd,
			at: at,
		})
		return nil
	})
	if err != nil {
		return 0, err
	}
	if committed && len(all) > 0 {
		// Every index entry of the range was scanned, and the batch wrote
		// none: one range deletion removes them all.
		if err := b.b.DeleteRange(lower, upper, nil); err != nil {
			return 0, fmt.Errorf("streamgen: write state: %w", err)
		}
		b.written = true
	}
	var deleted int64
	for _, d := range all {
		if !committed {
			if err := b.b.Delete(keys[d.start:d.end], nil); err != nil {
				return deleted, fmt.Errorf("streamgen: write state: %w", err)
			}
			b.written = true
		}
		v := Var{Scope: s, Variable: d.variable}
		key, sfx := keys[d.keyStart:d.keyEnd], keys[d.keyEnd:d.end]
		live, err := b.expiresAt(v, key, sfx, d.at)
		if err != nil {
			return deleted, err
		}
		if !live {
			continue // written again since, with another expiry or none, or deleted
		}
		if err := b.Delete(v, key, sfx); err != nil {
			return deleted, err
		}
		deleted++
	}
	return deleted, nil
}

// HasExpiringState reports whether an entry of scope expires before or at
// now (processing time) or watermark (event time): then a batch runs to
// remove it, even without new data. Index entries left by entries written
// again since (stale) do not count.
func (b *StateBatch) HasExpiringState(s Scope, now, watermark time.Time) (bool, error) {
	for clock, until := range []time.Time{ProcessingTimeExpiry: now, EventTimeExpiry: watermark} {
		if until.IsZero() {
			continue
		}
		due, err := b.expiryDue(s, ExpiryClock(clock), time.Time{}, until)
		if due || err != nil {
			return due, err
		}
	}
	return false, nil
}

// expiryDue reports whether an entry of scope expires on clock after the
// instant after (from the first, when it is zero) and at or before until.
// The index entries of entries written again since, with a later expiry
// or none, or deleted, are stale and do not count (the next batch's
// expiry pass drops them): no batch runs for them alone, which would move
// the watermark where nothing expires. When none is due, a later look,
// while the batch writes nothing and the store commits nothing, may
// start after until.
func (b *StateBatch) expiryDue(s Scope, clock ExpiryClock, after, until time.Time) (bool, error) {
	lower := append(appendScope(nil, ttlPrefix, s), byte(clock))
	from := lower
	if !after.IsZero() {
		from = appendInstant(append([]byte(nil), lower...), after.Add(1))
	}
	upper := appendInstant(append([]byte(nil), lower...), until.Add(1))
	// The index entries in range, copied out of the scan a chunk at a time;
	// the first whose entry still expires at its instant answers.
	type indexed struct {
		variable         uint8
		keyStart, keyEnd int
		end              int
		at               int64
	}
	const chunk = 256
	var (
		all  []indexed
		keys []byte
	)
	committed := !b.written // a batch that wrote nothing reads the committed index
	for {
		all, keys = all[:0], keys[:0]
		var next []byte
		err := b.scanFrom(from, upper, committed, func(k, _ []byte) error {
			if len(all) == chunk {
				next = append(next, k...)
				return errChunkFull
			}
			variable, keyStart, keyEnd, at, err := parseTTLKey(k, len(lower))
			if err != nil {
				return err
			}
			start := len(keys)
			keys = append(keys, k...)
			all = append(all, indexed{variable: variable, keyStart: start + keyStart, keyEnd: start + keyEnd, end: len(keys), at: at})
			return nil
		})
		if err != nil && err != errChunkFull {
			return false, err
		}
		for _, e := range all {
			live, err := b.expiresAt(Var{Scope: s, Variable: e.variable}, keys[e.keyStart:e.keyEnd], keys[e.keyEnd:e.end], e.at)
			if live || err != nil {
				return live, err
			}
		}
		if next == nil {
			return false, nil
		}
		from = next
	}
}

// parseTTLKey splits an expiry index key k, whose clock ends at
// prefix bytes, into the entry's variable, where its key lies in k
// ([keyStart, keyEnd); its suffix follows to the end) and its expiry
// (timerNanos).
func parseTTLKey(k []byte, prefix int) (variable uint8, keyStart, keyEnd int, at int64, err error) {
	rest := k[prefix:]
	if len(rest) < 9 {
		return 0, 0, 0, 0, fmt.Errorf("streamgen: expiry index entry %x is cut short", k)
	}
	n, w := binary.Uvarint(rest[9:])
	if w <= 0 || uint64(len(rest)-9-w) < n {
		return 0, 0, 0, 0, fmt.Errorf("streamgen: expiry index entry %x has a bad key length", k)
	}
	keyStart = prefix + 9 + w
	return rest[8], keyStart, keyStart + int(n), int64(binary.BigEndian.Uint64(rest[:8]) ^ 1<<63), nil
}

// expiresAt reports whether the state entry (v, key, suffix) exists, as
// the batch sees it, and expires at the instant at (timerNanos): whether
// an index entry for that instant is its entry's, not a stale one.
func (b *StateBatch) expiresAt(v Var, key, suffix []byte, at int64) (bool, error) {
	b.key = append(entryKey(b.key[:0], v, key), suffix...)
	written, err := b.mayHaveWritten()
	if err != nil {
		return false, err
	}
	value, ok, err := b.get(v, key, suffix, !written)
	if err != nil || !ok {
		return false, err
	}
	expiry, _, err := ReadExpiring(value)
	if err != nil {
		return false, err
	}
	return !expiry.IsZero() && expiry.UnixNano() == at, nil
}
