package typed

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// keyCodec turns grouping keys into the bytes that address their state and
// back. It is chosen once, when the stream is built, by looking at the
// key's type (the only use of reflection, and not on a hot path); encoding
// and decoding then go through unsafe views of the key, with no
// reflection: strings are their bytes, integers are 8 big-endian bytes
// with the sign flipped (so that byte order is numeric order), floats 8
// bytes ordered the same way (every NaN one key, -0 the key of +0, as
// Spark normalizes grouping keys), records of such fields (and times) their
// ordered encoding (codec.OrderedKey: keys sort as their fields, the
// first first), other records their binary encoding.
type keyCodec[K comparable] = valueCodec[K]

// valueCodec is keyCodec for any type: the values of state variables, and
// the keys of map state.
type valueCodec[K any] struct {
	encode func(b []byte, k *K) ([]byte, error)
	decode func(b []byte, k *K) error
	// typeName describes the key type in the checkpoint.
	typeName string
	schema   *codec.Schema
	// legacyTypeName, for a record key in its ordered encoding, is the
	// type name of checkpoints that hold the record's binary encoding
	// (written before keys were ordered); mode says which of the two
	// the codec reads and writes (useKeys).
	legacyTypeName string
	mode           *keyMode
	// parse, when set, reads a key given as JSON in place of
	// json.Unmarshal into K (see parseJSON): for the keys whose type has
	// no JSON form of its own, a window's and a join's.
	parse func(json []byte) ([]byte, error)
	// windows, for a key that begins with its window, describes the
	// windows (runtime.OperatorInfo.Windows).
	windows *runtime.WindowsMeta
	// byEncoding says that keys of the type may differ as Go values (==)
	// where their encodings, which address their state, are equal: a
	// batch gathers them by their encoding (see group).
	byEncoding bool
}

// group returns the group of key, the encoding of a key the operator's
// index of typed keys does not have, in groups: a new one, or, for keys
// gathered by their encoding, the group of a key that encodes alike, if
// the batch has one; and whether it is new.
func (c valueCodec[K]) group(groups *runtime.Groups, key []byte) (int32, bool) {
	if c.byEncoding {
		return groups.GroupOf(key)
	}
	return groups.NewGroup(key), true
}

// gatheredByEncoding reports whether values of t may differ as Go values
// (==) while their encodings are equal: floats (NaN is unequal to
// itself), times (one instant and offset in two *time.Location values),
// structs with fields the encoding leaves out (unexported ones, and those
// tagged stream:"-"), and the arrays, structs and interfaces that hold
// them.
func gatheredByEncoding(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr, reflect.String:
		return false
	case reflect.Array:
		return gatheredByEncoding(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); !f.IsExported() || streamSkipped(f.Tag) || gatheredByEncoding(f.Type) {
				return true
			}
		}
		return false
	}
	return true
}

// keyMode is the encoding of record keys that the queries of a pipeline
// use (runtime.OperatorInfo.UseKeys): every query started from the same
// grouping shares its codec, so they must agree.
type keyMode struct {
	legacy atomic.Bool
	mu     sync.Mutex
	users  int // queries running with it
}

// useKeys makes c read and write keys in the binary encoding (legacy)
// or the ordered one, for a query until it calls release; it fails
// while another query of the pipeline runs with the other.
func (c valueCodec[K]) useKeys(legacy bool) (release func(), err error) {
	m := c.mode
	if m == nil {
		return func() {}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.users > 0 && m.legacy.Load() != legacy {
		return nil, fmt.Errorf("another query of this pipeline is running on a checkpoint that stores its %s keys in the other encoding (one checkpoint holds them in their binary encoding, as an earlier version wrote them, the other in order of their fields): build the pipeline anew for this query", c.schema.Name)
	}
	m.legacy.Store(legacy)
	m.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.users--
			m.mu.Unlock()
		})
	}, nil
}

// wrap returns a codec of keys that hold c's after a prefix of their
// own (a window, an event time, a grouping set), under typeName: c's
// type name after prefix.
func wrap[W, K any](c valueCodec[K], prefix string, encode func(b []byte, w *W) ([]byte, error), decode func(b []byte, w *W) error) valueCodec[W] {
	w := valueCodec[W]{encode: encode, decode: decode, typeName: prefix + c.typeName, schema: c.schema, mode: c.mode, byEncoding: c.byEncoding}
	if c.legacyTypeName != "" {
		w.legacyTypeName = prefix + c.legacyTypeName
	}
	return w
}

var recordType = reflect.TypeFor[codec.Record]()

// binaryRecordKeys makes new key codecs encode records as versions before
// ordered keys did: how tests write a checkpoint of such a version.
var binaryRecordKeys atomic.Bool

func newKeyCodec[K comparable]() (keyCodec[K], error) {
	c, err := newValueCodec[K]()
	if err != nil || c.schema == nil || binaryRecordKeys.Load() {
		return c, err
	}
	ordered, ok := codec.NewOrderedKey(c.schema)
	if !ok {
		return c, nil
	}
	binary, unbinary := c.encode, c.decode
	mode := new(keyMode)
	c.typeName, c.legacyTypeName, c.mode = "orderedRecord", c.typeName, mode
	c.encode = func(b []byte, k *K) ([]byte, error) {
		if mode.legacy.Load() {
			return binary(b, k)
		}
		// The binary encoding goes after b, its ordered one after that,
		// which then moves to where the binary one began.
		n := len(b)
		b, err := binary(b, k)
		if err != nil {
			return b[:n], err
		}
		m := len(b)
		if b, err = ordered.Append(b, b[n:m]); err != nil {
			return b[:n], err
		}
		return append(b[:n], b[m:]...), nil
	}
	c.decode = func(b []byte, k *K) error {
		if mode.legacy.Load() {
			return unbinary(b, k)
		}
		var buf [64]byte
		bin, err := ordered.AppendBinary(buf[:0], b)
		if err != nil {
			return err
		}
		return unbinary(bin, k)
	}
	return c, nil
}

func newValueCodec[K any]() (valueCodec[K], error) {
	t := reflect.TypeFor[K]()
	c := valueCodec[K]{typeName: t.Kind().String(), byEncoding: gatheredByEncoding(t)}
	if reflect.PointerTo(t).Implements(recordType) {
		var zero K
		c.schema = any(&zero).(codec.Record).StreamSchema()
		c.typeName = "record"
		c.encode = func(b []byte, k *K) ([]byte, error) { return any(k).(codec.Record).AppendBinary(b) }
		c.decode = func(b []byte, k *K) error { return any(k).(codec.Record).UnmarshalBinary(b) }
		return c, nil
	}
	if t.Kind() == reflect.Struct && t.Size() == 0 {
		// struct{}: one key for everything (a grouping by window alone).
		c.encode = func(b []byte, _ *K) ([]byte, error) { return b, nil }
		c.decode = func([]byte, *K) error { return nil }
		return c, nil
	}
	switch t.Kind() {
	case reflect.String:
		c.encode = func(b []byte, k *K) ([]byte, error) { return append(b, *(*string)(unsafe.Pointer(k))...), nil }
		c.decode = func(b []byte, k *K) error {
			*(*string)(unsafe.Pointer(k)) = string(b)
			return nil
		}
	case reflect.Bool:
		c.encode = func(b []byte, k *K) ([]byte, error) {
			if *(*bool)(unsafe.Pointer(k)) {
				return append(b, 1), nil
			}
			return append(b, 0), nil
		}
		c.decode = func(b []byte, k *K) error {
			if len(b) != 1 {
				return fmt.Errorf("bool key of %d bytes", len(b))
			}
			*(*bool)(unsafe.Pointer(k)) = b[0] == 1
			return nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		size := t.Size()
		c.encode = func(b []byte, k *K) ([]byte, error) {
			return binary.BigEndian.AppendUint64(b, uint64(readInt(unsafe.Pointer(k), size))^1<<63), nil
		}
		c.decode = func(b []byte, k *K) error {
			if len(b) != 8 {
				return fmt.Errorf("integer key of %d bytes", len(b))
			}
			writeInt(unsafe.Pointer(k), size, binary.BigEndian.Uint64(b)^1<<63)
			return nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		size := t.Size()
		c.encode = func(b []byte, k *K) ([]byte, error) {
			return binary.BigEndian.AppendUint64(b, readUint(unsafe.Pointer(k), size)), nil
		}
		c.decode = func(b []byte, k *K) error {
			if len(b) != 8 {
				return fmt.Errorf("integer key of %d bytes", len(b))
			}
			writeInt(unsafe.Pointer(k), size, binary.BigEndian.Uint64(b))
			return nil
		}
	case reflect.Float64:
		c.encode = func(b []byte, k *K) ([]byte, error) {
			return binary.BigEndian.AppendUint64(b, codec.OrderedFloat64(codec.KeyFloat64(*(*float64)(unsafe.Pointer(k))))), nil
		}
		c.decode = func(b []byte, k *K) error {
			if len(b) != 8 {
				return fmt.Errorf("float key of %d bytes", len(b))
			}
			*(*float64)(unsafe.Pointer(k)) = codec.UnorderedFloat64(binary.BigEndian.Uint64(b))
			return nil
		}
	case reflect.Struct:
		return c, fmt.Errorf("type %v is a struct but not a record: add //streamgen:record to its doc comment and run go generate, so it has the generated codec a grouping key, a map key or a state value needs", t)
	default:
		return c, fmt.Errorf("type %v: use a string, an integer, a float64, a bool or a record (a struct whose doc comment holds //streamgen:record, after go generate) as a grouping key, a map key or a state value", t)
	}
	return c, nil
}

func readInt(p unsafe.Pointer, size uintptr) int64 {
	switch size {
	case 1:
		return int64(*(*int8)(p))
	case 2:
		return int64(*(*int16)(p))
	case 4:
		return int64(*(*int32)(p))
	}
	return *(*int64)(p)
}

func readUint(p unsafe.Pointer, size uintptr) uint64 {
	switch size {
	case 1:
		return uint64(*(*uint8)(p))
	case 2:
		return uint64(*(*uint16)(p))
	case 4:
		return uint64(*(*uint32)(p))
	}
	return *(*uint64)(p)
}

func writeInt(p unsafe.Pointer, size uintptr, v uint64) {
	switch size {
	case 1:
		*(*uint8)(p) = uint8(v)
	case 2:
		*(*uint16)(p) = uint16(v)
	case 4:
		*(*uint32)(p) = uint32(v)
	default:
		*(*uint64)(p) = v
	}
}

// parseJSON decodes a key given as JSON (a record's fields, a string, a
// number) and returns its encoding: how a read of a running query's state
// names the key it wants (runtime.OperatorInfo.ParseKey). It is called
// per request, never per row.
func (c valueCodec[K]) parseJSON(b []byte) ([]byte, error) {
	if c.parse != nil {
		return c.parse(b)
	}
	var k K
	if err := unmarshalKey(b, &k); err != nil {
		return nil, err
	}
	return c.encode(nil, &k)
}

// unmarshalKey decodes a key given as JSON into k: a record as its
// UnmarshalJSON does, except that a member naming none of its fields (or
// of its nested records' fields) is an error, since a key misspelled would
// otherwise read as another key, its field left zero; any other type as
// json.Unmarshal does. A string key given as a number, a bool or null is
// that text, read as the JSON string of it (runtime.BareStringKey); a key
// of another type is not null. A read names one key: this runs per
// request, never per row.
func unmarshalKey[K any](b []byte, k *K) error {
	if reflect.ValueOf(k).Elem().Kind() == reflect.String {
		if bare, ok := runtime.BareStringKey(b); ok {
			b, _ = json.Marshal(bare)
		}
	} else if string(bytes.TrimSpace(b)) == "null" {
		return errors.New("a key is not null")
	}
	rec, ok := any(k).(codec.Record)
	if !ok {
		return json.Unmarshal(b, k)
	}
	var r codec.JSONReader
	r.DisallowUnknownFields()
	r.Reset(b)
	rec.ReadJSON(&r)
	return r.Finish()
}

// windowedParse reads a windowed key given as JSON as runtime.KeyJSON
// writes it, {"window": {"start": ..., "end": ...}, "key": the key}, for
// the keys of the tumbling, sliding or cumulative windows: the window's
// bounds, 8 ordered bytes each, then the key as kc reads it. A window
// that is none of the operator's (runtime.WindowsMeta.Check: of another
// size, or one that does not start where the windows start) is refused.
func windowedParse[K comparable](kc keyCodec[K], windows *runtime.WindowsMeta) func([]byte) ([]byte, error) {
	return func(b []byte) ([]byte, error) {
		start, end, text, err := runtime.WindowedKeyJSON(b)
		if err != nil {
			return nil, err
		}
		if err := windows.Check(start, end); err != nil {
			return nil, err
		}
		key, err := kc.parseJSON(text)
		if err != nil {
			return nil, err
		}
		return append(runtime.AppendTimedKey(runtime.AppendTimedKey(make([]byte, 0, 16+len(key)), start), end), key...), nil
	}
}

// streamSkipped reports whether a field's tag leaves it out of the binary
// encoding: stream:"-".
func streamSkipped(tag reflect.StructTag) bool {
	opts, _ := tag.Lookup("stream")
	for opt := range strings.SplitSeq(opts, ",") {
		if strings.TrimSpace(opt) == "-" {
			return true
		}
	}
	return false
}
