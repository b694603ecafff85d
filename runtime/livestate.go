package runtime

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/streamgen/streamgen/codec"
)

// Reads of a running query's state: a Pebble snapshot of the last
// committed batch, decoded through the schemas the checkpoint stores, as
// streamgen inspect decodes a stopped query's.

// ErrUnknownState is wrapped by the error of a read of state that names
// an operator or a variable the query does not have.
var ErrUnknownState = errors.New("streamgen: no such state")

// ErrBadStateKey is wrapped by the error of a read of state whose key does
// not decode as the operator's grouping key.
var ErrBadStateKey = errors.New("streamgen: the key does not decode")

// ErrNotOperatorsWindow is wrapped by an operator's ParseKey error for a
// windowed key whose window is none of the operator's windows (another
// size, or another start).
var ErrNotOperatorsWindow = errors.New("not one of the operator's windows")

// DefaultStateLimit is the most rows a read of state returns when its
// request sets no limit.
const DefaultStateLimit = 1000

// StateRequest names the state a read wants (Query.LookupState).
type StateRequest struct {
	// Operator is the stateful operator: its name (the user function's,
	// as the progress reports show it) or its index in the pipeline.
	Operator string
	// Variable is the state variable; "" for every variable.
	Variable string
	// Key is the grouping key as JSON, as the rows show it:
	//   - a string ("alice"; one given as a number, a bool or null is
	//     its text, so that key=42 in a URL reads the user "42"), a
	//     number (a key other than a string's is not null);
	//   - a record's fields, {"user": "alice", "day": 3}, by their JSON
	//     names or by their Go names (as the rows show them) or both; a
	//     member that names no field is refused (ErrBadStateKey), not
	//     read as a field left zero, a member left out is its zero
	//     value, and a string field's value is a JSON string. From a checkpoint alone (a standby with no query of the
	//     pipeline), a JSON name is read where the checkpoint keeps it,
	//     and neither a ",string" field's quotes nor an embedded struct's
	//     promoted fields are;
	//   - a windowed aggregation's or window join's key, {"window":
	//     {"start": ..., "end": ...}, "key": ...}, and a grouping set's,
	//     {"set": N, "key": ...}.
	// Nil reads every key, up to Limit rows.
	Key json.RawMessage
	// Limit is the most rows returned; 0 means DefaultStateLimit.
	Limit int
}

// StateAnswer is what a read of a running query's state returns.
type StateAnswer struct {
	// Query is the query's name (its id when it has none).
	Query string `json:"query"`
	// Operator and Variable are what was read: the operator's name and
	// index, and the variable ("" for all).
	Operator      string `json:"operator"`
	OperatorIndex int    `json:"operatorIndex"`
	Variable      string `json:"variable,omitempty"`
	// BatchID is the batch whose commit the rows reflect: the last one
	// committed when the read began (Kafka Streams' Position). -1 before
	// the first commit.
	BatchID int64 `json:"batchId"`
	// Rows are the entries read, by partition, variable, key and entry.
	Rows []StateRow `json:"rows"`
	// More is true when Limit cut the rows short.
	More bool `json:"more,omitempty"`
}

// ReadState calls fn with a reader of the query's state as the last
// committed batch left it (a snapshot: the batches that commit meanwhile
// do not change what it reads), without stopping the query. The reader
// is valid during the call only, and Stop waits for the call to return:
// keep it short. A query that has stopped gives an error wrapping
// ErrStoreClosed. Safe for concurrent use, with the query running.
//
// With a committer of its own (kafka's exactly-once) the state read is
// the query's store, committed after the batch's transaction: a reader
// never sees a batch that is rolled back.
func (q *Query) ReadState(fn func(r *CheckpointReader) error) error {
	r, err := q.store.ReadSnapshot()
	if err != nil {
		return err
	}
	err = fn(r)
	if cerr := r.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("streamgen: close the state snapshot: %w", cerr)
	}
	return err
}

// LookupState reads rows of the query's state, as of its last committed
// batch (see ReadState): the entries of one key, or of every key up to a
// limit. An operator or variable the query does not have gives an error
// wrapping ErrUnknownState that lists those it has; a key that does not
// decode, one wrapping ErrBadStateKey. Safe for concurrent use.
func (q *Query) LookupState(req StateRequest) (StateAnswer, error) {
	var ans StateAnswer
	err := q.ReadState(func(r *CheckpointReader) error {
		var key []byte
		if req.Key != nil {
			var err error
			if key, err = q.encodeKey(r, req.Operator, req.Key); err != nil {
				return err
			}
			key = nonNil(key)
		}
		var err error
		ans, err = r.Lookup(req, key)
		ans.Query = q.Name()
		return err
	})
	return ans, err
}

// EncodeKey returns the encoding in the store of the grouping key given
// as JSON (see StateRequest.Key) for the operator named operator: what
// CheckpointReader.Lookup takes, and what a key's partition is computed
// from. Safe for concurrent use.
func (q *Query) EncodeKey(operator string, key json.RawMessage) ([]byte, error) {
	var enc []byte
	err := q.ReadState(func(r *CheckpointReader) error {
		var err error
		enc, err = q.encodeKey(r, operator, key)
		enc = nonNil(enc)
		return err
	})
	if err != nil {
		return nil, err
	}
	return enc, nil
}

// PartitionKey returns the grouping key given as JSON for the operator
// named operator in the encoding input is partitioned by: a string's
// bytes, an integer's 8 big-endian bytes with the sign bit flipped, a
// record's binary encoding (MarshalBinary's), whichever encoding the
// checkpoint stores the key in (a record's may be ordered, see
// codec.OrderedKey). The key of a windowed aggregation is in the
// partition of its key, whatever its window, and so is a grouping set's
// key: neither the window nor the set is part of what PartitionKey
// returns. Safe for concurrent use.
func (q *Query) PartitionKey(operator string, key json.RawMessage) ([]byte, error) {
	enc, prefix, err := q.transferKey(operator, key)
	if err != nil {
		return nil, err
	}
	return enc[prefix:], nil
}

// TransferKey returns the grouping key given as JSON for the operator
// named operator in an encoding that any checkpoint of the operator reads
// back with StoreKey, whichever encoding each stores its keys in: the
// window's or the grouping set's bytes, if the key has them, then the
// key as PartitionKey encodes it. It names a key to the checkpoint of
// another query of the same pipeline (a standby's copy of a partition).
// Safe for concurrent use.
func (q *Query) TransferKey(operator string, key json.RawMessage) ([]byte, error) {
	enc, _, err := q.transferKey(operator, key)
	return enc, err
}

// transferKey returns TransferKey's encoding of key and the length of
// its window's or grouping set's bytes in front.
func (q *Query) transferKey(operator string, key json.RawMessage) (enc []byte, prefix int, err error) {
	err = q.ReadState(func(r *CheckpointReader) error {
		om, op, err := r.operator(operator)
		if err != nil {
			return err
		}
		if enc, err = q.parseKey(op, om, key); err != nil {
			return err
		}
		if enc, err = transcodeKey(om, enc, true); err != nil {
			return err
		}
		if prefix = keyPrefix(om); len(enc) < prefix {
			return fmt.Errorf("%w: a key of %d bytes, short of the %d bytes of its window or grouping set", ErrBadStateKey, len(enc), prefix)
		}
		return nil
	})
	return enc, prefix, err
}

// StoreKey returns the key that TransferKey gave in the encoding the
// checkpoint stores operator's keys in: what Lookup takes.
func (c *CheckpointReader) StoreKey(operator string, key []byte) ([]byte, error) {
	om, _, err := c.operator(operator)
	if err != nil {
		return nil, err
	}
	enc, err := transcodeKey(om, key, false)
	if err != nil {
		return nil, err
	}
	return nonNil(enc), nil
}

// ParseKey returns the grouping key given as JSON for the operator named
// operator in the encoding the checkpoint stores it in, from what the
// checkpoint says of the key alone, with no query running: a key of a
// basic type (see ParseBasicKey), in a window ({"window": {"start",
// "end"}, "key": ...}) or a grouping set ({"set": N, "key": ...}) or
// neither, and a record key as its rows show it, its members named by its
// fields' Go names, or by their JSON names where the checkpoint keeps
// them (codec.AppendDynamicBinary). A window that is none of the
// operator's is refused (ErrNotOperatorsWindow) where the checkpoint
// describes them (OperatorMeta.Windows); one written before it did does
// not, and such a window is read, and finds no rows.
func (c *CheckpointReader) ParseKey(operator string, key json.RawMessage) ([]byte, error) {
	om, _, err := c.operator(operator)
	if err != nil {
		return nil, err
	}
	enc, err := parseMetaKey(om, key)
	if err != nil {
		return nil, err
	}
	return nonNil(enc), nil
}

// parseMetaKey reads a key given as JSON for operator om from what its
// description says of it (see CheckpointReader.ParseKey).
func parseMetaKey(om OperatorMeta, key []byte) ([]byte, error) {
	text := key
	var out []byte
	var err error
	if groupingSetKinds[om.Kind] {
		var set uint32
		if set, text, err = GroupingSetKeyJSON(text); err != nil {
			return nil, fmt.Errorf("%w: %s is not a key of operator %q: %v", ErrBadStateKey, truncate(key, 80), om.Name, err)
		}
		out = binary.BigEndian.AppendUint32(out, set)
	}
	typeName := om.KeyType
	if inner, ok := strings.CutPrefix(typeName, "window+"); ok {
		var start, end int64
		if start, end, text, err = WindowedKeyJSON(text); err != nil {
			return nil, fmt.Errorf("%w: %s is not a key of operator %q: %v", ErrBadStateKey, truncate(key, 80), om.Name, err)
		}
		if om.Windows != nil {
			if err := om.Windows.Check(start, end); err != nil {
				return nil, fmt.Errorf("%w: %s is not a key of operator %q: %w", ErrBadStateKey, truncate(key, 80), om.Name, err)
			}
		}
		out = AppendTimedKey(AppendTimedKey(out, start), end)
		typeName = inner
	}
	if om.Key != nil {
		// Read as the rows show it, by its schema (AppendDynamicJSON's
		// form), into the encoding the checkpoint keeps.
		bin, err := codec.AppendDynamicBinary(nil, om.Key, text)
		if err == nil && strings.HasSuffix(typeName, orderedRecordKey) {
			if ordered, ok := codec.NewOrderedKey(om.Key); !ok {
				err = fmt.Errorf("the key record %s has no ordered encoding", om.Key.Name)
			} else {
				bin, err = ordered.Append(nil, bin)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s is not a key of operator %q (%s): %v", ErrBadStateKey, truncate(key, 80), om.Name, keyTypeName(om), err)
		}
		return append(out, bin...), nil
	}
	k, err := ParseBasicKey(typeName, text)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a key of operator %q (%s): %v", ErrBadStateKey, truncate(key, 80), om.Name, keyTypeName(om), err)
	}
	return append(out, k...), nil
}

// GroupingSetKeyJSON reads a grouping set's key as KeyJSON writes it,
// {"set": N, "key": the key}, and returns the set and the key's JSON
// (never null). Members other than these two are refused.
func GroupingSetKeyJSON(text []byte) (set uint32, key []byte, err error) {
	var v struct {
		Set *uint32         `json:"set"`
		Key json.RawMessage `json:"key"`
	}
	err = unmarshalStrict(text, &v)
	if err != nil || v.Set == nil || v.Key == nil || string(bytes.TrimSpace(v.Key)) == "null" {
		return 0, nil, keyFormError(`a grouping set's key is {"set": its set, "key": the key}`, err)
	}
	return *v.Set, v.Key, nil
}

// WindowedKeyJSON reads a windowed key as KeyJSON writes it, {"window":
// {"start": ..., "end": ...}, "key": the key}, and returns the window's
// bounds in Unix nanoseconds and the key's JSON (never null). Members
// other than these are refused.
func WindowedKeyJSON(text []byte) (start, end int64, key []byte, err error) {
	var v struct {
		Window *struct {
			Start *time.Time `json:"start"`
			End   *time.Time `json:"end"`
		} `json:"window"`
		Key json.RawMessage `json:"key"`
	}
	err = unmarshalStrict(text, &v)
	if err != nil || v.Window == nil || v.Window.Start == nil || v.Window.End == nil || v.Key == nil || string(bytes.TrimSpace(v.Key)) == "null" {
		return 0, 0, nil, keyFormError(`a windowed key is {"window": {"start": ..., "end": ...}, "key": the key}`, err)
	}
	return v.Window.Start.UnixNano(), v.Window.End.UnixNano(), v.Key, nil
}

// keyFormError says what form a key takes, and, if err says it, what
// was wrong with the one given.
func keyFormError(form string, err error) error {
	if err != nil {
		return fmt.Errorf("%s (%v)", form, err)
	}
	return errors.New(form)
}

// unmarshalStrict is json.Unmarshal into a plain struct, refusing members
// that name none of its fields.
func unmarshalStrict(text []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(text))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("more after the value")
	}
	return nil
}

// keyPrefix is how many bytes an operator's keys hold in front of the
// grouping key: a grouping set's 4 (the kinds "cube", "rollup" and
// "groupingSets"), then a window's 16 (a KeyType with "window+" in
// front).
func keyPrefix(om OperatorMeta) int {
	n := 0
	if groupingSetKinds[om.Kind] {
		n += 4
	}
	if strings.HasPrefix(om.KeyType, "window+") {
		n += 16
	}
	return n
}

// transcodeKey turns a key of operator om, when a record's in its ordered
// encoding, into its binary encoding (toBinary) or a binary encoding into
// the ordered one; keys of other types are returned as they are. The
// window's or the grouping set's bytes in front stay as they are.
func transcodeKey(om OperatorMeta, key []byte, toBinary bool) ([]byte, error) {
	if !strings.HasSuffix(om.KeyType, orderedRecordKey) || om.Key == nil {
		return key, nil
	}
	skip := keyPrefix(om)
	if len(key) < skip {
		return nil, fmt.Errorf("%w: a key of %d bytes, short of the %d bytes of its window or grouping set", ErrBadStateKey, len(key), skip)
	}
	return transcodeOrdered(om.Key, append([]byte(nil), key[:skip]...), key[skip:], toBinary)
}

// transcodeOrdered appends to out the record key of schema, given in its
// ordered encoding, in its binary encoding (toBinary), or the other way.
func transcodeOrdered(schema *codec.Schema, out, key []byte, toBinary bool) ([]byte, error) {
	ordered, ok := codec.NewOrderedKey(schema)
	if !ok {
		return nil, fmt.Errorf("streamgen: the key record %s has no ordered encoding", schema.Name)
	}
	var err error
	if toBinary {
		out, err = ordered.AppendBinary(out, key)
	} else {
		out, err = ordered.Append(out, key)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadStateKey, err)
	}
	return out, nil
}

func (q *Query) encodeKey(r *CheckpointReader, operator string, key json.RawMessage) ([]byte, error) {
	om, op, err := r.operator(operator)
	if err != nil {
		return nil, err
	}
	return q.parseKey(op, om, key)
}

// operator returns the description of the operator named name (or given
// by its index) and its index.
func (c *CheckpointReader) operator(name string) (OperatorMeta, int, error) {
	m, ok, err := c.Meta()
	if err != nil {
		return OperatorMeta{}, 0, err
	}
	if !ok {
		return OperatorMeta{}, 0, fmt.Errorf("%w: the query has no state yet", ErrUnknownState)
	}
	op, err := findOperator(m, name)
	if err != nil {
		return OperatorMeta{}, 0, err
	}
	return m.Operators[op], op, nil
}

// Lookup reads the rows req names (its Key ignored): the entries of the
// encoded key (see Query.EncodeKey), or of every key for nil, up to
// req.Limit, with the batch they reflect. An empty key that is not nil
// is a key, the empty string's: EncodeKey, StoreKey and ParseKey never
// give nil for a key. See Query.LookupState.
func (c *CheckpointReader) Lookup(req StateRequest, key []byte) (StateAnswer, error) {
	ans := StateAnswer{Variable: req.Variable, BatchID: -1, Rows: []StateRow{}}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultStateLimit
	}
	m, ok, err := c.Meta()
	if err != nil {
		return ans, err
	}
	if !ok {
		return ans, fmt.Errorf("%w: the query has no state yet", ErrUnknownState)
	}
	op, err := findOperator(m, req.Operator)
	if err != nil {
		return ans, err
	}
	ans.Operator, ans.OperatorIndex = m.Operators[op].Name, op
	d, err := newRowDecoder(m, op, req.Variable)
	if err != nil {
		return ans, err
	}
	p, _, err := c.Progress()
	if err != nil {
		return ans, err
	}
	ans.BatchID = p.BatchID
	take := func(e Entry) error {
		row, ok, err := d.decode(e)
		if err != nil || !ok {
			return err
		}
		if len(ans.Rows) == limit {
			ans.More = true
			return errStopRows
		}
		ans.Rows = append(ans.Rows, row)
		return nil
	}
	if key == nil {
		err = c.ScanState(uint8(op), take)
	} else {
		err = c.scanKey(m.Operators[op], uint8(op), key, take)
	}
	if errors.Is(err, errStopRows) {
		err = nil
	}
	return ans, err
}

// nonNil returns key, or an empty key that is not nil for nil: an encoder
// returns nil for a key of no bytes (the empty string), which Lookup
// would take for every key.
func nonNil(key []byte) []byte {
	if key == nil {
		return []byte{}
	}
	return key
}

// errStopRows ends a scan that has its rows.
var errStopRows = errors.New("enough rows")

// findOperator returns the index of the operator that name names: its
// index, or its name when one operator has it.
func findOperator(m Meta, name string) (int, error) {
	if i, err := strconv.Atoi(name); err == nil {
		if i < 0 || i >= len(m.Operators) {
			return 0, fmt.Errorf("%w: no operator %d (the query has %s)", ErrUnknownState, i, operatorNames(m))
		}
		return i, nil
	}
	found := -1
	for i, om := range m.Operators {
		if om.Name != name {
			continue
		}
		if found >= 0 {
			return 0, fmt.Errorf("%w: operators %d and %d are both named %q: name one by its index", ErrUnknownState, found, i, name)
		}
		found = i
	}
	if found < 0 {
		return 0, fmt.Errorf("%w: no operator named %q (the query has %s)", ErrUnknownState, name, operatorNames(m))
	}
	return found, nil
}

// operatorNames lists the operators of m for an error.
func operatorNames(m Meta) string {
	if len(m.Operators) == 0 {
		return "no stateful operator"
	}
	names := make([]string, len(m.Operators))
	for i, om := range m.Operators {
		names[i] = fmt.Sprintf("%d %q (%s)", i, om.Name, om.Kind)
	}
	return strings.Join(names, ", ")
}

// parseKey encodes the grouping key given as JSON for operator op.
func (q *Query) parseKey(op int, om OperatorMeta, text json.RawMessage) ([]byte, error) {
	var parse func([]byte) ([]byte, error)
	if op < len(q.plan.Operators) {
		parse = q.plan.Operators[op].Info().ParseKey
	}
	if parse == nil {
		return parseMetaKey(om, text)
	}
	key, err := parse(text)
	if om.Key != nil && !errors.Is(err, ErrNotOperatorsWindow) && (err != nil || goNamed(om, text)) {
		// Rows show a record key's members by their fields' Go names
		// (AppendDynamicJSON), which its JSON names (what parse reads)
		// need not be, and a user may mix the two: such a key is read
		// by its schema, as a checkpoint alone reads it (Go names
		// first, then JSON names), its window, if it has one, checked
		// by parse. Where that fails (a field read from a JSON string
		// by its type's own text, or with ",string"), parse's reading
		// stands; where both fail on a member, the schema's error names
		// the member that neither reading knows.
		meta, merr := parseMetaKey(om, text)
		switch {
		case merr == nil:
			return meta, nil
		case err == nil:
			return key, nil
		case unknownMember(err):
			return nil, fmt.Errorf("%w%s", merr, keyNamesHint(om))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a key of operator %q (%s): %v%s", ErrBadStateKey, truncate(text, 80), om.Name, keyTypeName(om), err, keyNamesHint(om))
	}
	return key, nil
}

// unknownMember reports whether err is a JSON reading's refusal of a
// member that names no field (codec.JSONReader.DisallowUnknownFields).
func unknownMember(err error) bool {
	var je *codec.JSONError
	return errors.As(err, &je) && strings.HasPrefix(je.Msg, "unknown field ")
}

// keyNamesHint lists the names a record key of om's may give its fields,
// for an error; "" for a key of another type.
func keyNamesHint(om OperatorMeta) string {
	if om.Key == nil {
		return ""
	}
	names := make([]string, len(om.Key.Fields))
	for i, f := range om.Key.Fields {
		names[i] = f.Name
		if f.JSON != "" && f.JSON != "-" {
			names[i] += " (" + strconv.Quote(f.JSON) + ")"
		}
	}
	return fmt.Sprintf(" (a record key names its fields by their Go names or their JSON names: %s)", strings.Join(names, ", "))
}

// goNamed reports whether text names a record key of operator om by its
// fields' Go names alone, as the operator's rows show it: each member of
// the key's object (inside its grouping set and window, if it has them)
// is a field's Go name.
func goNamed(om OperatorMeta, text []byte) bool {
	if om.Key == nil {
		return false
	}
	var err error
	if groupingSetKinds[om.Kind] {
		if _, text, err = GroupingSetKeyJSON(text); err != nil {
			return false
		}
	}
	if strings.HasPrefix(om.KeyType, "window+") {
		if _, _, text, err = WindowedKeyJSON(text); err != nil {
			return false
		}
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(text, &members) != nil || len(members) == 0 {
		return false
	}
	for name := range members {
		if !slices.ContainsFunc(om.Key.Fields, func(f codec.Field) bool { return f.Name == name }) {
			return false
		}
	}
	return true
}

// keyTypeName names an operator's grouping key type for an error.
func keyTypeName(om OperatorMeta) string {
	if om.Key != nil {
		return "a record " + om.Key.Name
	}
	return om.KeyType
}

// truncate quotes b for an error, cut to n bytes.
func truncate(b []byte, n int) string {
	if len(b) > n {
		return strconv.Quote(string(b[:n])) + "..."
	}
	return strconv.Quote(string(b))
}

// BareStringKey reports whether text, given for a string key, is a JSON
// number, true, false or null, and returns its text: the key it spells,
// as a URL's key=42 gives a user "42" (StateRequest.Key). A string key is
// never a number, and never null, so nothing else is meant.
func BareStringKey(text []byte) (string, bool) {
	t := string(bytes.TrimSpace(text))
	if t == "true" || t == "false" || t == "null" {
		return t, true
	}
	if t == "" || !json.Valid([]byte(t)) || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return "", false
	}
	return t, true
}

// ParseBasicKey encodes, as grouping keys of the basic type typeName are
// (see AppendBasicJSON), a key given as JSON: a string, a number, a bool,
// or {} for the empty struct.
func ParseBasicKey(typeName string, text []byte) ([]byte, error) {
	text = bytes.TrimSpace(text)
	if string(text) == "null" && typeName != "string" {
		return nil, errors.New("a key is not null")
	}
	switch typeName {
	case "string":
		if bare, ok := BareStringKey(text); ok {
			return []byte(bare), nil
		}
		var s string
		if err := json.Unmarshal(text, &s); err != nil {
			return nil, err
		}
		return []byte(s), nil
	case "bool":
		var v bool
		if err := json.Unmarshal(text, &v); err != nil {
			return nil, err
		}
		if v {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case "int", "int8", "int16", "int32", "int64":
		v, err := strconv.ParseInt(string(text), 10, bitSize(typeName))
		if err != nil {
			return nil, err
		}
		return binary.BigEndian.AppendUint64(nil, uint64(v)^1<<63), nil
	case "uint", "uint8", "uint16", "uint32", "uint64", "uintptr":
		v, err := strconv.ParseUint(string(text), 10, bitSize(typeName))
		if err != nil {
			return nil, err
		}
		return binary.BigEndian.AppendUint64(nil, v), nil
	case "struct":
		var v struct{}
		if err := json.Unmarshal(text, &v); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return nil, fmt.Errorf("a key of type %s is not read from JSON here", typeName)
}

// bitSize is the size of the integer type typeName.
func bitSize(typeName string) int {
	for _, n := range []string{"8", "16", "32", "64"} {
		if strings.HasSuffix(typeName, n) {
			v, _ := strconv.Atoi(n)
			return v
		}
	}
	return 64
}

// scanKey calls fn with each entry of key in operator op, in every
// partition: the entries of each variable under the key (a variable
// ordered by event time, whose entries begin with their time, is scanned
// whole and filtered).
func (c *CheckpointReader) scanKey(om OperatorMeta, op uint8, key []byte, fn func(Entry) error) error {
	var ids, timed []uint8
	for _, v := range om.Variables {
		if v.Index {
			continue
		}
		ids = append(ids, v.ID)
		if v.Encoding == EncodingByEventTime {
			timed = append(timed, v.ID)
		}
	}
	slices.Sort(ids)
	it, err := c.r.NewIter(&pebble.IterOptions{LowerBound: []byte{statePrefix}, UpperBound: []byte{statePrefix + 1}})
	if err != nil {
		return c.s.fail(fmt.Errorf("read state: %w", err))
	}
	defer it.Close()
	var prefix []byte
	// Each partition in turn: the partition comes first in a state key.
	for valid := it.First(); valid; {
		part := binary.BigEndian.Uint32(it.Key()[1:5])
		for _, id := range ids {
			vr := Var{Scope: Scope{Partition: part, Operator: op}, Variable: id}
			if slices.Contains(timed, id) {
				prefix = append(appendScope(prefix[:0], statePrefix, vr.Scope), id)
			} else {
				prefix = entryKey(prefix[:0], vr, key)
			}
			for ok := it.SeekGE(prefix); ok && bytes.HasPrefix(it.Key(), prefix); ok = it.Next() {
				k := it.Key()
				n, w := binary.Uvarint(k[7:])
				if w <= 0 || uint64(len(k)-7-w) < n {
					return fmt.Errorf("streamgen: a state entry's key is corrupt")
				}
				e := Entry{Partition: part, Operator: op, Variable: id, Key: k[7+w : 7+w+int(n)], Suffix: k[7+w+int(n):]}
				if slices.Contains(timed, id) && !bytes.Equal(e.Suffix, key) {
					continue
				}
				if e.Value, err = it.ValueAndErr(); err != nil {
					return c.s.fail(fmt.Errorf("read state: %w", err))
				}
				if err := fn(e); err != nil {
					return err
				}
			}
			if err := it.Error(); err != nil {
				return c.s.fail(fmt.Errorf("read state: %w", err))
			}
		}
		next := binary.BigEndian.AppendUint32([]byte{statePrefix}, part)
		valid = it.SeekGE(prefixEnd(next))
	}
	return nil
}
