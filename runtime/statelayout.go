package runtime

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/streamgen/streamgen/codec"
)

// The encodings of state entries, as StateInfo.Encoding names them, so that
// a checkpoint says how to read its bytes without the operator's code
// (OpenCheckpoint, streamgen inspect). A value inside an entry is of the
// variable's type: a record's binary encoding (its schema is stored), or
// a basic type (StateInfo.ValueType) encoded as grouping keys are (see
// AppendBasicJSON).
const (
	// EncodingRecord: the entry is the value.
	EncodingRecord = "record"
	// EncodingExpiring: AppendExpiring's layout, an expiry then the value
	// (transformWithState's variables, deduplication's keys). A list's
	// entries have an 8-byte big-endian sequence number as suffix, and
	// its header, with no suffix, holds uvarint(next sequence number); a
	// map's entries have the encoded map key as suffix.
	EncodingExpiring = "expiring"
	// EncodingGroupState: (flat)mapGroupsWithState's row: a flags byte
	// (GroupStateHasValue, GroupStateHasTimeout), the timeout as 8
	// big-endian bytes of Unix nanoseconds if set, then the value if set.
	EncodingGroupState = "groupState"
	// EncodingCountWindow: uvarint(rows counted so far), then the value.
	EncodingCountWindow = "countWindow"
	// EncodingSessions: uvarint(n), then n sessions, each varint(start),
	// varint(end) in Unix nanoseconds, uvarint(len(value)) and the value.
	EncodingSessions = "sessions"
	// EncodingInstants: uvarint(n), then n instants in order, each
	// varint(t) in Unix nanoseconds, uvarint(len(value)) and the value:
	// the aggregate of a key's rows at each instant (the windows of a time
	// difference, which follow their rows).
	EncodingInstants = "instants"
	// EncodingSlices: the slices of a key's sliding or cumulative
	// windows, each the aggregate of the key's rows in a stretch of
	// event time that every window either holds or does not (a window
	// is the merge of the slices it holds): varint(closed), the Unix
	// nanoseconds at or before which the key's windows have all closed
	// (math.MinInt64: none yet), then uvarint(n) and n slices in order
	// of start, each varint(start) in Unix nanoseconds,
	// uvarint(len(value)) and the value.
	EncodingSlices = "slices"
	// EncodingByEventTime: the variable is ordered by event time (see
	// eventorder.go): an entry's key is an instant (8 big-endian bytes of
	// Unix nanoseconds, sign bit flipped), its suffix the grouping key,
	// and it has no value; the loop removes the entries at or before the
	// watermark. Deduplication with the event time in its key.
	EncodingByEventTime = "byEventTime"
	// EncodingJoinBuffer: a side of a stream-stream join, its rows of a
	// key in order of event time: the suffix is the row's event time (8
	// bytes, AppendTimedKey's), then the batch id (8) and the row's number
	// in the batch (4) that make it unique; the value is a flags byte
	// (JoinRowMatched) then the row.
	EncodingJoinBuffer = "joinBuffer"
	// EncodingTableRows: a table a stream keeps up to date (a
	// stream-table join, a table-table join, either side of a foreign-key
	// join): a key's row (no suffix), or its versions, each under its
	// event time (8 bytes, AppendTimedKey's); the value is a byte, 1 for
	// a row (which follows) and 0 for a tombstone (a version that says
	// there is none: the latest row of a key is removed instead).
	EncodingTableRows = "tableRows"
)

// JoinRowMatched flags a buffered row of a join that has had a match, on
// a side that keeps the flag (see StateInfo.NoMatchFlag: on others, a
// row is flagged only if it matched when it came).
const JoinRowMatched = 1

// The flags of an EncodingGroupState row.
const (
	GroupStateHasValue   = 1
	GroupStateHasTimeout = 2
)

// AppendBasicJSON appends, as JSON, a value of the basic type typeName
// ("string", "int64", "uint8", "float64", "bool", or "struct" for the
// empty struct) in the encoding of grouping keys and basic state values:
// a string's bytes, an integer's 8 big-endian bytes (a signed one with
// its sign bit flipped), a float64's 8 bytes ordered as the numbers are,
// a bool's one byte, and nothing for the empty struct. A string that is
// not UTF-8 is written as base64 in an object {"base64": ...}.
func AppendBasicJSON(b []byte, typeName string, data []byte) ([]byte, error) {
	eight := func() (uint64, error) {
		if len(data) != 8 {
			return 0, fmt.Errorf("streamgen: a %s of %d bytes, want 8", typeName, len(data))
		}
		return binary.BigEndian.Uint64(data), nil
	}
	switch typeName {
	case "string":
		if !utf8.Valid(data) {
			b = append(b, `{"base64":"`...)
			b = base64.StdEncoding.AppendEncode(b, data)
			return append(b, `"}`...), nil
		}
		return codec.AppendJSONStringBytes(b, data), nil
	case "bool":
		if len(data) != 1 {
			return b, fmt.Errorf("streamgen: a bool of %d bytes, want 1", len(data))
		}
		return strconv.AppendBool(b, data[0] == 1), nil
	case "int", "int8", "int16", "int32", "int64":
		u, err := eight()
		if err != nil {
			return b, err
		}
		return strconv.AppendInt(b, int64(u^1<<63), 10), nil
	case "uint", "uint8", "uint16", "uint32", "uint64":
		u, err := eight()
		if err != nil {
			return b, err
		}
		return strconv.AppendUint(b, u, 10), nil
	case "float64":
		u, err := eight()
		if err != nil {
			return b, err
		}
		if u&(1<<63) != 0 {
			u &^= 1 << 63
		} else {
			u = ^u
		}
		f := math.Float64frombits(u)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.AppendQuote(b, strconv.FormatFloat(f, 'g', -1, 64)), nil
		}
		return strconv.AppendFloat(b, f, 'g', -1, 64), nil
	case "struct":
		return append(b, "{}"...), nil
	}
	return b, fmt.Errorf("streamgen: values of type %q cannot be shown", typeName)
}

// appendTyped appends a value of a record (schema) or of a basic type. A
// windowed key ("window+" and the key's type) is a window's start and end,
// 8 ordered bytes of Unix nanoseconds each, then the key: it is written as
// {"window":{"start":...,"end":...},"key":...}.
func appendTyped(b []byte, schema *codec.Schema, typeName string, data []byte) ([]byte, error) {
	if inner, ok := strings.CutPrefix(typeName, "window+"); ok {
		if len(data) < 16 {
			return b, fmt.Errorf("streamgen: a windowed key of %d bytes", len(data))
		}
		start := time.Unix(0, int64(binary.BigEndian.Uint64(data)^1<<63)).UTC()
		end := time.Unix(0, int64(binary.BigEndian.Uint64(data[8:])^1<<63)).UTC()
		b = append(b, `{"window":{"start":"`...)
		b = start.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","end":"`...)
		b = end.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `"},"key":`...)
		b, err := appendTyped(b, schema, inner, data[16:])
		return append(b, '}'), err
	}
	if typeName == orderedRecordKey && schema != nil {
		bin, err := transcodeOrdered(schema, nil, data, true)
		if err != nil {
			return b, err
		}
		data = bin
	}
	if schema != nil {
		return codec.AppendDynamicJSON(b, schema, data)
	}
	if typeName == "" {
		return append(b, "null"...), nil // a variable with no value (deduplication's keys)
	}
	return AppendBasicJSON(b, typeName, data)
}

// StateRow is one entry of a state variable, decoded: what streamgen
// inspect prints.
type StateRow struct {
	// Partition is the input partition that owns the entry.
	Partition uint32 `json:"partition"`
	// Key is the grouping key, as JSON.
	Key json.RawMessage `json:"key"`
	// Variable names the state variable.
	Variable string `json:"variable"`
	// Index is a list entry's sequence number; MapKey a map entry's key.
	Index  *uint64         `json:"index,omitempty"`
	MapKey json.RawMessage `json:"mapKey,omitempty"`
	// ExpiresAt is when the entry expires (a variable with a time to
	// live, or one ordered by event time: once the watermark reaches it);
	// Timeout is a group state's timeout.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	Timeout   *time.Time `json:"timeout,omitempty"`
	// EventTime and Matched are a join's buffered row's event time and
	// whether it has had a match (nil on a side that does not keep it:
	// VariableMeta.NoMatchFlag).
	EventTime *time.Time `json:"eventTime,omitempty"`
	Matched   *bool      `json:"matched,omitempty"`
	// Value is the entry's value, as JSON: for sessions, a list of
	// {"start", "end", "value"}; for a count window, {"count",
	// "value"}; for the slices of sliding or cumulative windows,
	// {"closed", "slices"}, the slices a list of {"start", "value"}.
	Value json.RawMessage `json:"value"`
	// header marks a list's header entry, which holds no value.
	header bool
}

// decodeEntry decodes the entry (suffix, raw) of variable v into row.
func decodeEntry(row *StateRow, v VariableMeta, schema *codec.Schema, suffix, raw []byte) error {
	var err error
	switch v.Encoding {
	case EncodingRecord, "":
		if v.Kind == "map" {
			if row.MapKey, err = appendTyped(nil, v.MapKey, v.MapKeyType, suffix); err != nil {
				return fmt.Errorf("map key: %w", err)
			}
		}
		row.Value, err = appendTyped(nil, schema, v.ValueType, raw)
	case EncodingExpiring:
		var at time.Time
		at, raw, err = ReadExpiring(raw)
		if err != nil {
			return err
		}
		if !at.IsZero() {
			row.ExpiresAt = &at
		}
		switch {
		case v.Kind == "list" && len(suffix) == 0:
			row.header = true
			return nil
		case v.Kind == "list":
			if len(suffix) != 8 {
				return fmt.Errorf("streamgen: a list entry with a %d-byte index", len(suffix))
			}
			i := binary.BigEndian.Uint64(suffix)
			row.Index = &i
		case v.Kind == "map":
			if row.MapKey, err = appendTyped(nil, v.MapKey, v.MapKeyType, suffix); err != nil {
				return fmt.Errorf("map key: %w", err)
			}
		}
		row.Value, err = appendTyped(nil, schema, v.ValueType, raw)
	case EncodingGroupState:
		if len(raw) == 0 {
			return fmt.Errorf("streamgen: an empty group state row")
		}
		flags, rest := raw[0], raw[1:]
		if flags&GroupStateHasTimeout != 0 {
			if len(rest) < 8 {
				return fmt.Errorf("streamgen: a group state row cut short")
			}
			at := time.Unix(0, int64(binary.BigEndian.Uint64(rest))).UTC()
			row.Timeout, rest = &at, rest[8:]
		}
		if flags&GroupStateHasValue == 0 {
			row.Value = json.RawMessage("null")
			return nil
		}
		row.Value, err = appendTyped(nil, schema, v.ValueType, rest)
	case EncodingCountWindow:
		n, w := binary.Uvarint(raw)
		if w <= 0 {
			return fmt.Errorf("streamgen: a count window row without its count")
		}
		b := strconv.AppendUint([]byte(`{"count":`), n, 10)
		b = append(b, `,"value":`...)
		if b, err = appendTyped(b, schema, v.ValueType, raw[w:]); err == nil {
			row.Value = append(b, '}')
		}
	case EncodingSessions:
		row.Value, err = appendSessions(schema, v.ValueType, raw)
	case EncodingInstants:
		row.Value, err = appendInstants(schema, v.ValueType, raw)
	case EncodingSlices:
		row.Value, err = appendSlices(schema, v.ValueType, raw)
	case EncodingByEventTime:
		row.Value = json.RawMessage("null") // a key seen; its time is ExpiresAt
	case EncodingTableRows:
		if len(suffix) == 8 {
			at := time.Unix(0, int64(binary.BigEndian.Uint64(suffix)^1<<63)).UTC()
			row.EventTime = &at
		}
		if len(raw) == 0 || raw[0] == 0 {
			row.Value = json.RawMessage("null")
			return nil
		}
		row.Value, err = appendTyped(nil, schema, v.ValueType, raw[1:])
	case EncodingJoinBuffer:
		if len(suffix) != 20 || len(raw) == 0 {
			return fmt.Errorf("streamgen: a join row of %d bytes under a %d-byte suffix", len(raw), len(suffix))
		}
		at := time.Unix(0, int64(binary.BigEndian.Uint64(suffix)^1<<63)).UTC()
		row.EventTime = &at
		if !v.NoMatchFlag {
			matched := raw[0]&JoinRowMatched != 0
			row.Matched = &matched
		}
		row.Value, err = appendTyped(nil, schema, v.ValueType, raw[1:])
	default:
		return fmt.Errorf("streamgen: state encoding %q is not known to this version", v.Encoding)
	}
	return err
}

// appendInstants renders an EncodingInstants entry.
func appendInstants(schema *codec.Schema, typeName string, raw []byte) ([]byte, error) {
	return appendTimedValues(schema, typeName, raw, []string{"time"}, "instants")
}

// appendSlices renders an EncodingSlices entry, as {"closed", "slices"}:
// the instant through which the key's windows have closed (null when
// none has), and a list of {"start", "value"}.
func appendSlices(schema *codec.Schema, typeName string, raw []byte) ([]byte, error) {
	closed, w := binary.Varint(raw)
	if w <= 0 {
		return nil, fmt.Errorf("streamgen: stored slices are corrupt")
	}
	b := []byte(`{"closed":`)
	if closed == math.MinInt64 {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = time.Unix(0, closed).UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	slices, err := appendTimedValues(schema, typeName, raw[w:], []string{"start"}, "slices")
	if err != nil {
		return nil, err
	}
	b = append(append(b, `,"slices":`...), slices...)
	return append(b, '}'), nil
}

// appendSessions renders an EncodingSessions entry.
func appendSessions(schema *codec.Schema, typeName string, raw []byte) ([]byte, error) {
	return appendTimedValues(schema, typeName, raw, []string{"start", "end"}, "sessions")
}

// appendTimedValues renders uvarint(n), then n items, each one varint
// Unix nanoseconds per name of times, uvarint(len(value)) and the value,
// as a JSON array of objects with those times and "value".
func appendTimedValues(schema *codec.Schema, typeName string, raw []byte, times []string, what string) ([]byte, error) {
	corrupt := fmt.Errorf("streamgen: stored %s are corrupt", what)
	n, w := binary.Uvarint(raw)
	if w <= 0 {
		return nil, corrupt
	}
	raw = raw[w:]
	b := []byte{'['}
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		for _, name := range times {
			at, w := binary.Varint(raw)
			if w <= 0 {
				return nil, corrupt
			}
			raw = raw[w:]
			b = append(b, '"')
			b = append(b, name...)
			b = append(b, `":"`...)
			b = time.Unix(0, at).UTC().AppendFormat(b, time.RFC3339Nano)
			b = append(b, `",`...)
		}
		size, w := binary.Uvarint(raw)
		if w <= 0 || uint64(len(raw)-w) < size {
			return nil, corrupt
		}
		b = append(b, `"value":`...)
		var err error
		if b, err = appendTyped(b, schema, typeName, raw[w:w+int(size)]); err != nil {
			return nil, err
		}
		b = append(b, '}')
		raw = raw[w+int(size):]
	}
	return append(b, ']'), nil
}
