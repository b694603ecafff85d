package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/streamgen/streamgen/codec"
)

// FormatVersion is the version of the checkpoint layout. A checkpoint of
// another version is refused at start.
const FormatVersion = 1

// Meta describes the pipeline that wrote a checkpoint: enough to refuse,
// at start, a pipeline that cannot continue from it.
type Meta struct {
	Format    int            `json:"format"`
	Operators []OperatorMeta `json:"operators"`
}

// OperatorMeta describes one stateful operator.
type OperatorMeta struct {
	// Kind is the operator ("mapGroupsWithState", ...).
	Kind string `json:"kind"`
	// Name is the operator's name in the pipeline.
	Name string `json:"name"`
	// Key is the schema of the grouping key, or nil for a key of a basic
	// type, described by KeyType.
	Key     *codec.Schema `json:"key,omitempty"`
	KeyType string        `json:"keyType,omitempty"`
	// States are the schemas of the operator's state variables, by name.
	States map[string]*codec.Schema `json:"states"`
}

// CheckMeta compares the pipeline described by current with the one that
// wrote the checkpoint. A new checkpoint takes current. A checkpoint of
// another format, with other operators, or with a state or key type whose
// fields changed type is refused with an error that lists every
// difference; added or removed fields are compatible, and the stored
// description is updated to current.
func (s *Store) CheckMeta(current Meta) error {
	current.Format = FormatVersion
	v, closer, err := s.db.Get([]byte(metaKey))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return s.writeMeta(current)
	case err != nil:
		return fmt.Errorf("streamgen: read checkpoint metadata: %w", err)
	}
	var stored Meta
	err = json.Unmarshal(v, &stored)
	closer.Close()
	if err != nil {
		return fmt.Errorf("%w: its metadata is corrupt: %v", ErrIncompatibleCheckpoint, err)
	}
	if diffs := compareMeta(stored, current); len(diffs) > 0 {
		return fmt.Errorf("%w: the checkpoint was written by another pipeline:\n  %s", ErrIncompatibleCheckpoint, strings.Join(diffs, "\n  "))
	}
	return s.writeMeta(current)
}

func (s *Store) writeMeta(m Meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("streamgen: encode checkpoint metadata: %w", err)
	}
	if err := s.db.Set([]byte(metaKey), b, pebble.Sync); err != nil {
		return fmt.Errorf("streamgen: write checkpoint metadata: %w", err)
	}
	return nil
}

// compareMeta lists what makes stored and current incompatible.
func compareMeta(stored, current Meta) []string {
	if stored.Format != current.Format {
		return []string{fmt.Sprintf("checkpoint format %d, this version reads format %d", stored.Format, current.Format)}
	}
	var diffs []string
	if len(stored.Operators) != len(current.Operators) {
		diffs = append(diffs, fmt.Sprintf("%d stateful operators (%s), now %d (%s)",
			len(stored.Operators), operatorList(stored.Operators), len(current.Operators), operatorList(current.Operators)))
	}
	for i := range min(len(stored.Operators), len(current.Operators)) {
		was, now := stored.Operators[i], current.Operators[i]
		where := fmt.Sprintf("operator %d", i)
		if was.Kind != now.Kind || was.Name != now.Name {
			diffs = append(diffs, fmt.Sprintf("%s was %s %q, is now %s %q", where, was.Kind, was.Name, now.Kind, now.Name))
			continue
		}
		where = fmt.Sprintf("operator %d (%s %q)", i, now.Kind, now.Name)
		if was.KeyType != now.KeyType {
			diffs = append(diffs, fmt.Sprintf("%s: key type was %s, is now %s", where, was.KeyType, now.KeyType))
		} else if was.Key != nil && now.Key != nil {
			if err := codec.Compatible(was.Key, now.Key); err != nil {
				diffs = append(diffs, fmt.Sprintf("%s: key: %v", where, err))
			}
		}
		for name, schema := range now.States {
			old, ok := was.States[name]
			if !ok {
				continue // a new state variable starts empty
			}
			if err := codec.Compatible(old, schema); err != nil {
				diffs = append(diffs, fmt.Sprintf("%s: state %q: %v", where, name, err))
			}
		}
	}
	return diffs
}

func operatorList(ops []OperatorMeta) string {
	names := make([]string, len(ops))
	for i, o := range ops {
		names[i] = fmt.Sprintf("%s %q", o.Kind, o.Name)
	}
	return strings.Join(names, ", ")
}
