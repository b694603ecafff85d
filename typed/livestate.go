package typed

import (
	"encoding/json"
	"fmt"

	"github.com/streamgen/streamgen/runtime"
)

// Reads of a running query's state, typed: the key and the values go
// through their JSON methods (the generated ones, for records), once per
// read, never per row of the stream.

// StateVariable names a state variable of a running query: the operator,
// by the name the progress reports give it (the user function's) or by its
// index, and the variable (a transformWithState variable's name; "state"
// for a mapGroupsWithState or flatMapGroupsWithState group state;
// "aggregate" for an aggregation's).
type StateVariable struct {
	Operator, Variable string
}

// ReadValue reads key's value of a value variable (or a group state, or
// an aggregation's accumulator) of the running query q, as its last
// committed batch left it: ok is false when the key has none. batchID is
// that batch (-1 before the first commit). Safe for concurrent use, with
// the query running.
func ReadValue[V any, K comparable](q *runtime.Query, v StateVariable, key K) (value V, ok bool, batchID int64, err error) {
	ans, err := lookup(q, v, key)
	if err != nil {
		return value, false, -1, err
	}
	for _, row := range ans.Rows {
		if string(row.Value) == "null" {
			continue // a group state with a timeout and no value
		}
		if err := json.Unmarshal(row.Value, &value); err != nil {
			return value, false, ans.BatchID, fmt.Errorf("streamgen: read state %s/%s: decode the value: %w", v.Operator, v.Variable, err)
		}
		return value, true, ans.BatchID, nil
	}
	return value, false, ans.BatchID, nil
}

// ReadList reads key's elements of a list variable of the running query
// q, in the list's order, as its last committed batch left them (see
// ReadValue).
func ReadList[V any, K comparable](q *runtime.Query, v StateVariable, key K) (values []V, batchID int64, err error) {
	ans, err := lookup(q, v, key)
	if err != nil {
		return nil, -1, err
	}
	values = make([]V, 0, len(ans.Rows))
	for _, row := range ans.Rows {
		var x V
		if err := json.Unmarshal(row.Value, &x); err != nil {
			return nil, ans.BatchID, fmt.Errorf("streamgen: read state %s/%s: decode an element: %w", v.Operator, v.Variable, err)
		}
		values = append(values, x)
	}
	return values, ans.BatchID, nil
}

// ReadMap reads key's entries of a map variable of the running query q,
// as its last committed batch left them (see ReadValue).
func ReadMap[MK comparable, V any, K comparable](q *runtime.Query, v StateVariable, key K) (entries map[MK]V, batchID int64, err error) {
	ans, err := lookup(q, v, key)
	if err != nil {
		return nil, -1, err
	}
	entries = make(map[MK]V, len(ans.Rows))
	for _, row := range ans.Rows {
		var mk MK
		var x V
		if err := json.Unmarshal(row.MapKey, &mk); err != nil {
			return nil, ans.BatchID, fmt.Errorf("streamgen: read state %s/%s: decode a map key: %w", v.Operator, v.Variable, err)
		}
		if err := json.Unmarshal(row.Value, &x); err != nil {
			return nil, ans.BatchID, fmt.Errorf("streamgen: read state %s/%s: decode a map value: %w", v.Operator, v.Variable, err)
		}
		entries[mk] = x
	}
	return entries, ans.BatchID, nil
}

// lookup reads every entry of key in v.
func lookup[K comparable](q *runtime.Query, v StateVariable, key K) (runtime.StateAnswer, error) {
	if v.Variable == "" {
		return runtime.StateAnswer{}, fmt.Errorf("streamgen: read state of operator %q: no variable named", v.Operator)
	}
	k, err := json.Marshal(key)
	if err != nil {
		return runtime.StateAnswer{}, fmt.Errorf("streamgen: read state %s/%s: encode the key: %w", v.Operator, v.Variable, err)
	}
	// A key's entries are few, except a long list's or a large map's:
	// read them all.
	ans, err := q.LookupState(runtime.StateRequest{Operator: v.Operator, Variable: v.Variable, Key: k, Limit: 1 << 30})
	if err != nil {
		return ans, fmt.Errorf("streamgen: read state %s/%s: %w", v.Operator, v.Variable, err)
	}
	return ans, nil
}
