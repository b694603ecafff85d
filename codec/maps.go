package codec

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Integer is the constraint of integer map keys.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// SortedKeys returns the keys of m in increasing order: the order in which
// encoding/json writes a map with string keys.
func SortedKeys[M ~map[K]V, K ~string, V any](m M) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Entry is a map entry.
type Entry[K, V any] struct {
	Key   K
	Value V
}

// OrderedEntries returns the entries of m in increasing order of key (NaN
// keys first): the order in which generated binary encoders write a map's
// entries, so that equal maps are equal bytes (a state write that changes
// nothing can be skipped, and a changelog is reproducible). Entries, not
// keys, so that a NaN key keeps its value.
func OrderedEntries[M ~map[K]V, K cmp.Ordered, V any](m M) []Entry[K, V] {
	return AppendOrderedEntries(make([]Entry[K, V], 0, len(m)), m)
}

// SmallMap is the number of entries that generated encoders sort in an
// array on their own stack (see AppendOrderedEntries): a map of at most
// that many entries is written without allocating.
const SmallMap = 8

// AppendOrderedEntries appends the entries of m to dst and returns dst
// with them in the order of OrderedEntries. Generated encoders pass an
// empty slice of an array of SmallMap entries on their stack, so that a
// small map is sorted there; a larger one grows it onto the heap.
func AppendOrderedEntries[M ~map[K]V, K cmp.Ordered, V any](dst []Entry[K, V], m M) []Entry[K, V] {
	start := len(dst)
	for k, v := range m {
		dst = append(dst, Entry[K, V]{k, v})
	}
	entries := dst[start:]
	if len(entries) > 12 {
		slices.SortFunc(entries, func(a, b Entry[K, V]) int { return cmp.Compare(a.Key, b.Key) })
		return dst
	}
	// Insertion sort, comparing keys directly: for a few entries it beats
	// a sort that calls a comparison function.
	for i := 1; i < len(entries); i++ {
		for j := i; j > 0 && cmp.Less(entries[j].Key, entries[j-1].Key); j-- {
			entries[j], entries[j-1] = entries[j-1], entries[j]
		}
	}
	return dst
}

// SortedIntKeys returns the keys of m ordered by their decimal text, the
// order in which encoding/json writes a map with integer keys ("10" before
// "9", "-1" before "0").
func SortedIntKeys[M ~map[K]V, K Integer, V any](m M) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareDecimal[K])
	return keys
}

func compareDecimal[K Integer](a, b K) int {
	var x, y [24]byte
	return slices.Compare(appendDecimal(x[:0], a), appendDecimal(y[:0], b))
}

func appendDecimal[K Integer](b []byte, k K) []byte {
	if k < 0 {
		return strconv.AppendInt(b, int64(k), 10)
	}
	return strconv.AppendUint(b, uint64(k), 10)
}

// ParseJSONIntKey parses an object key, just read by r.NextKey, as the
// integer map key of the given bit size, as encoding/json does. A key that
// is not a decimal integer in range gives a type error for target, which
// the caller passes to r.KeyError once it has read the entry's value (whose
// own errors encoding/json reports first) and drops the entry.
func ParseJSONIntKey(r *JSONReader, key []byte, bits int, target string) (int64, *JSONError) {
	v, err := strconv.ParseInt(string(key), 10, bits)
	if err != nil {
		return 0, r.keyError(key, target)
	}
	return v, nil
}

// ParseJSONUintKey is ParseJSONIntKey for unsigned keys.
func ParseJSONUintKey(r *JSONReader, key []byte, bits int, target string) (uint64, *JSONError) {
	v, err := strconv.ParseUint(string(key), 10, bits)
	if err != nil {
		return 0, r.keyError(key, target)
	}
	return v, nil
}

// GrowAt returns s with room for an element at index i, as encoding/json
// grows a slice it decodes into: an element already within the slice's
// capacity is reused, a new one is zero.
func GrowAt[S ~[]E, E any](s S, i int) S {
	if i < len(s) {
		return s
	}
	if i < cap(s) {
		return s[:i+1]
	}
	var zero E
	return append(s, zero)
}

// TextKey is the constraint of map keys that encoding/json writes with
// their MarshalText method.
type TextKey interface {
	comparable
	MarshalText() ([]byte, error)
}

// KeyText is a map key and its text (MarshalText).
type KeyText[K any] struct {
	Key  K
	Text string
}

// TextKeys returns the keys of m with their texts, ordered by text: how
// encoding/json writes a map whose keys write themselves. An error from
// MarshalText is worded as encoding/json words it, typ naming the map
// type: json: encoding error for type "map[K]V": "...".
func TextKeys[M ~map[K]V, K TextKey, V any](m M, typ string) ([]KeyText[K], error) {
	keys := make([]KeyText[K], 0, len(m))
	for k := range m {
		t, err := k.MarshalText()
		if err != nil {
			return nil, &JSONError{Offset: -1, Err: textKeyError{typ, err.Error()}}
		}
		keys = append(keys, KeyText[K]{k, string(t)})
	}
	slices.SortFunc(keys, func(a, b KeyText[K]) int { return strings.Compare(a.Text, b.Text) })
	return keys, nil
}

// textKeyError is encoding/json's message for a map key whose MarshalText
// failed.
type textKeyError struct{ typ, msg string }

func (e textKeyError) Error() string {
	return "json: encoding error for type " + strconv.Quote(e.typ) + ": " + strconv.Quote(e.msg)
}

// ParseJSONTextKey reads an object key, just read by r.NextKey, into a map
// key with UnmarshalText, as encoding/json does. The caller passes an
// error to r.Fail once it has read the entry's value, and drops the entry.
func ParseJSONTextKey[K any, PK interface {
	*K
	UnmarshalText([]byte) error
}](key []byte) (K, error) {
	var k K
	err := PK(&k).UnmarshalText(key)
	return k, err
}
