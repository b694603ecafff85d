package runtime

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/streamgen/streamgen/codec"
)

// FormatVersion is the version of the checkpoint layout. A checkpoint of
// another version is refused at start.
const FormatVersion = 2

// Meta describes the query that wrote a checkpoint: its stable id, and
// enough of its pipeline to refuse, at start, one that cannot continue
// from it.
type Meta struct {
	Format int `json:"format"`
	// ID is the query's id, made when the checkpoint was created and kept
	// by every later start.
	ID        string         `json:"id"`
	Sources   []string       `json:"sources"`
	Operators []OperatorMeta `json:"operators"`
	// WatermarkPolicy is the MultipleWatermarkPolicy the checkpoint's
	// query combines its watermarks by ("min" or "max"): kept by every
	// later start, whatever it asks for, as Spark keeps it in its offset
	// log, so that a restart computes the watermark as the run before it
	// would have. Empty in checkpoints written before it was kept, whose
	// next start records its own.
	WatermarkPolicy string `json:"watermarkPolicy,omitempty"`
}

// OperatorMeta describes one stateful operator.
type OperatorMeta struct {
	// Kind is the operator ("mapGroupsWithState", ...).
	Kind string `json:"kind"`
	// Name is the operator's name in the pipeline: the user function's,
	// unless the pipeline names it.
	Name       string `json:"name"`
	Timeout    string `json:"timeout,omitempty"`
	OutputMode string `json:"outputMode,omitempty"`
	// Key is the schema of the grouping key, or nil for a key of a basic
	// type, described by KeyType.
	Key     *codec.Schema `json:"key,omitempty"`
	KeyType string        `json:"keyType,omitempty"`
	// Windows describes the windows of an operator whose keys begin with
	// one (OperatorInfo.Windows); nil in checkpoints written before it
	// was kept, which are checked at start through the first window they
	// store: a change of size is refused, a change of start or slide
	// where that window shows it.
	Windows *WindowsMeta `json:"windows,omitempty"`
	// States are the schemas of the operator's state variables, by name.
	States map[string]*codec.Schema `json:"states"`
	// Params and Rows are OperatorInfo's; empty in checkpoints written
	// before they were kept, which are not compared.
	Params string        `json:"params,omitempty"`
	Rows   *codec.Schema `json:"rows,omitempty"`
	// Sets describes OperatorInfo.GroupingSets; empty in checkpoints
	// written before it was kept, which are not compared.
	Sets string `json:"sets,omitempty"`
	// Variables are the operator's state variables, by name: their ids in
	// the store, kinds and times to live. A variable the pipeline no longer
	// declares stays, with its data, until the operator deletes it.
	Variables map[string]VariableMeta `json:"variables,omitempty"`
	// deleted names the variables the operator deletes at start.
	deleted []string
	// legacyKeyType is the KeyType of checkpoints that hold the keys in
	// the encoding before KeyType's (OperatorInfo.LegacyKeyType).
	legacyKeyType string
}

// WindowsMeta describes an operator's windows: tumbling or sliding
// windows, whose keys begin with their window, each Size long, one
// starting every Slide (Size for tumbling windows), Offset past the Unix
// epoch (modulo Slide); cumulative windows (Step not 0), which start
// every Size (Slide) and end Step, 2×Step, ... Size after their start;
// or session windows (Size 0), which close after Gap without a row.
type WindowsMeta struct {
	Size   time.Duration `json:"size"`
	Slide  time.Duration `json:"slide"`
	Offset time.Duration `json:"offset,omitempty"`
	Step   time.Duration `json:"step,omitempty"`
	Gap    time.Duration `json:"gap,omitempty"`
	// Difference is the time difference of Kafka Streams' sliding windows
	// (typed.TimeDifference), which follow a key's rows: its windows' ends
	// are its timers, so another difference is refused.
	Difference time.Duration `json:"difference,omitempty"`
	// PastEnd says that Difference's windows close once the watermark is
	// past their last instant (Kafka Streams' rule). A checkpoint written
	// without it closed them when the watermark reached it, and its
	// operator keeps that rule, so that no window it wrote is written
	// again.
	PastEnd bool `json:"pastEnd,omitempty"`
}

// String describes the windows, as in "10m0s long, one every 5m0s,
// starting 15s past the epoch (modulo 5m0s)", or "sessions closed after
// 30s without a row".
func (w WindowsMeta) String() string {
	if w.Difference != 0 {
		return "windows of rows at most " + w.Difference.String() + " apart"
	}
	if w.Size == 0 {
		return "sessions closed after " + w.Gap.String() + " without a row"
	}
	s := w.Size.String() + " long"
	if w.Step != 0 {
		s = "from " + w.Step.String() + " to " + w.Size.String() + " long by " + w.Step.String() + ", all starting every " + w.Slide.String()
	} else if w.Slide != w.Size {
		s += ", one every " + w.Slide.String()
	}
	if w.Offset != 0 {
		s += ", starting " + w.Offset.String() + " past the epoch (modulo " + w.Slide.String() + ")"
	}
	return s
}

// Check returns nil when [start, end), in Unix nanoseconds, is one of the
// windows, else an error wrapping ErrNotOperatorsWindow.
func (w WindowsMeta) Check(start, end int64) error {
	size, slide := int64(w.Size), int64(w.Slide)
	aligned := slide <= 0 || floorMod(start-int64(w.Offset), slide) == 0
	if aligned && (end-start == size || w.Step > 0 && end > start && end-start <= size && (end-start)%int64(w.Step) == 0) {
		return nil
	}
	return fmt.Errorf("%w: they are %s, and [%s, %s) is not", ErrNotOperatorsWindow, w,
		time.Unix(0, start).UTC().Format(time.RFC3339Nano), time.Unix(0, end).UTC().Format(time.RFC3339Nano))
}

// floorMod is a mod b in [0, b), for b > 0.
func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// VariableMeta describes one state variable in the checkpoint.
type VariableMeta struct {
	ID   uint8  `json:"id"`
	Kind string `json:"kind,omitempty"`
	TTL  string `json:"ttl,omitempty"`
	// Expiries is the clock of the expiries the variable's stored entries
	// may carry ("processing time", "event time"): its TTL's, or, once a
	// restart has taken its TTL away, the one it had (what was written
	// keeps its expiry). Metadata written before it was kept says it in
	// TTL alone.
	Expiries string `json:"expiries,omitempty"`
	// Encoding, ValueType, MapKeyType and MapKey say how to read the
	// variable's entries (see StateInfo).
	Encoding   string        `json:"encoding,omitempty"`
	ValueType  string        `json:"valueType,omitempty"`
	MapKeyType string        `json:"mapKeyType,omitempty"`
	MapKey     *codec.Schema `json:"mapKey,omitempty"`
	// Index marks an index of the operator's other state
	// (StateInfo.Index), whose entries are no state rows.
	Index bool `json:"index,omitempty"`
	// NoMatchFlag marks a join side whose stored rows' matched flags
	// are not kept up to date (StateInfo.NoMatchFlag).
	NoMatchFlag bool `json:"noMatchFlag,omitempty"`
}

// planMeta describes plan as a checkpoint records it.
func planMeta(plan *Plan) Meta {
	m := Meta{Format: FormatVersion}
	for _, in := range plan.Inputs {
		m.Sources = append(m.Sources, in.Source.Name())
	}
	for _, op := range plan.Operators {
		info := op.Info()
		om := OperatorMeta{
			Kind: info.Kind, Name: info.Name, Timeout: info.Timeout, OutputMode: info.OutputMode,
			Key: info.Key, KeyType: info.KeyType, Windows: info.Windows, States: map[string]*codec.Schema{}, Params: info.Params, Rows: info.Rows,
			Sets: setsText(info.GroupingSets, info.Dimensions), Variables: map[string]VariableMeta{}, deleted: info.Deleted, legacyKeyType: info.LegacyKeyType,
		}
		for i, s := range info.States {
			om.States[s.Name] = s.Schema
			vm := VariableMeta{ID: uint8(i), Kind: s.Kind, Encoding: s.Encoding, ValueType: s.ValueType, MapKeyType: s.MapKeyType, MapKey: s.MapKey, Index: s.Index, NoMatchFlag: s.NoMatchFlag}
			if s.TTL > 0 {
				vm.TTL = s.TTL.String()
				if s.EventTimeTTL {
					vm.TTL += eventTimeTTL
				}
				vm.Expiries = ttlClock(vm.TTL)
			}
			om.Variables[s.Name] = vm
		}
		m.Operators = append(m.Operators, om)
	}
	return m
}

// checkMeta compares the pipeline described by current with the one that
// wrote the checkpoint, and returns the checkpoint's query id (current's,
// for a new checkpoint). A checkpoint of another format, or whose state
// or key types changed a field's type, or whose operators or windows'
// sizes differ, is refused with an error that lists every difference. Other
// sources, operator names, timeouts, output modes, windows' starts or
// sessions' gaps are refused too, unless changes allows them. Added or removed
// fields are compatible, but a removed field that looks renamed (see
// renamedFields) is refused, naming both fields and the tag that keeps its
// values, unless changes allows its loss: then warn is called for it. The
// stored description becomes current.
//
// It returns the checkpoint's description as it now stands: the query id
// is the checkpoint's, and each operator's variables keep the ids stored
// for them (a new variable takes an id no stored variable holds, so that
// it never reads another's data); the data of the variables the operator
// deletes is deleted, and they are dropped.
func (s *Store) checkMeta(current Meta, changes metaChanges, warn func(string)) (Meta, error) {
	allowChanges := changes.pipeline
	stored, found, err := s.storedMeta()
	if err != nil {
		return Meta{}, err
	}
	if !found {
		// A checkpoint that has committed a batch wrote its metadata
		// before it: without it, it is damaged, not new, and starting
		// on it would take its state for this pipeline's unchecked.
		if p, committed, err := s.readProgress(s.db); err != nil {
			return Meta{}, err
		} else if committed && !changes.restored {
			return Meta{}, fmt.Errorf("%w: its metadata (the pipeline's description) is missing, though it has committed batches (the last, %d); restore it from a copy, or start from a new checkpoint directory",
				ErrCorruptCheckpoint, p.BatchID)
		}
		for i := range current.Operators {
			current.Operators[i].deleted = nil
		}
		return current, s.writeMeta(current)
	}
	if stored.Format != current.Format {
		return Meta{}, fmt.Errorf("%w: checkpoint format %d, this version reads format %d; start from a new checkpoint directory",
			ErrIncompatibleCheckpoint, stored.Format, current.Format)
	}
	if p := stored.WatermarkPolicy; p != "" && p != MinWatermark.String() && p != MaxWatermark.String() {
		return Meta{}, fmt.Errorf("%w: its metadata is corrupt: watermark policy %q (want %q or %q)", ErrIncompatibleCheckpoint, p, MinWatermark, MaxWatermark)
	}
	identity, types := compareMeta(stored, current)
	renamed := renamedFields(stored, current) // before reconcileVariables takes the deleted ones
	for i := range min(len(stored.Operators), len(current.Operators)) {
		was, now := stored.Operators[i], current.Operators[i]
		if was.Windows != nil || now.Windows == nil || was.Kind != now.Kind || !strings.HasPrefix(was.KeyType, "window+") {
			continue
		}
		// A checkpoint written before it described its windows: one of
		// its stored windows says how long they are.
		id, ty, err := s.checkStoredWindow(i, was, *now.Windows)
		if err != nil {
			return Meta{}, err
		}
		identity, types = append(identity, id...), append(types, ty...)
	}
	var drop []dropVariable
	for i := range min(len(stored.Operators), len(current.Operators)) {
		d, diffs := reconcileVariables(i, &stored.Operators[i], &current.Operators[i])
		drop = append(drop, d...)
		types = append(types, diffs...)
	}
	if !allowChanges {
		types = append(identity, types...)
	}
	if len(types) > 0 {
		hint := ""
		if len(identity) > 0 && !allowChanges {
			hint = "\n(if the change is meant and the state can be read, start with runtime.AllowPipelineChanges())"
		}
		return Meta{}, fmt.Errorf("%w: the checkpoint was written by another pipeline:\n  %s%s", ErrIncompatibleCheckpoint, strings.Join(types, "\n  "), hint)
	}
	if len(renamed) > 0 && !allowChanges && !changes.fieldLoss {
		return Meta{}, fmt.Errorf("%w: a state field looks renamed, and its stored values would be lost:\n  %s\n(if the loss is meant, start with runtime.AllowStateFieldLoss() or runtime.AllowPipelineChanges())",
			ErrIncompatibleCheckpoint, strings.Join(renamed, "\n  "))
	}
	for _, w := range renamed {
		warn(w)
	}
	for _, d := range drop {
		if err := s.deleteVariable(d.op, d.id); err != nil {
			return Meta{}, err
		}
	}
	for i := range min(len(stored.Operators), len(current.Operators)) {
		if op := &current.Operators[i]; op.legacyKeyType != "" && stored.Operators[i].KeyType == op.legacyKeyType {
			op.KeyType = op.legacyKeyType // the keys stay as they are stored
		}
	}
	current.ID = stored.ID
	if p := stored.WatermarkPolicy; p != "" && p != current.WatermarkPolicy {
		if changes.policyAsked {
			warn(fmt.Sprintf("the checkpoint's query combines its watermarks by MultipleWatermarkPolicy %q, which it keeps: this start's %q is not used (a checkpoint's watermark policy cannot change)", p, current.WatermarkPolicy))
		}
		current.WatermarkPolicy = p
	}
	return current, s.writeMeta(current)
}

// storedMeta reads the checkpoint's description of its pipeline; found
// is false for a new checkpoint.
func (s *Store) storedMeta() (stored Meta, found bool, err error) {
	v, closer, err := s.db.Get([]byte(metaKey))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return Meta{}, false, nil
	case err != nil:
		return Meta{}, false, fmt.Errorf("streamgen: read checkpoint metadata: %w", err)
	}
	err = json.Unmarshal(v, &stored)
	closer.Close()
	if err == nil {
		err = stored.checkSchemas()
	}
	if err != nil {
		return Meta{}, false, fmt.Errorf("%w: its metadata is corrupt: %v", ErrIncompatibleCheckpoint, err)
	}
	return stored, true, nil
}

// checkSchemas reports a schema of the stored metadata m that lacks what
// the generator's schemas always have (codec.Schema.CheckStored), which
// comparing it would trip on.
func (m *Meta) checkSchemas() error {
	for i := range m.Operators {
		op := &m.Operators[i]
		schemas := []*codec.Schema{op.Key, op.Rows}
		for _, name := range slices.Sorted(maps.Keys(op.States)) {
			schemas = append(schemas, op.States[name])
		}
		for _, name := range slices.Sorted(maps.Keys(op.Variables)) {
			schemas = append(schemas, op.Variables[name].MapKey)
		}
		for _, schema := range schemas {
			if schema == nil {
				continue
			}
			if err := schema.CheckStored(); err != nil {
				return fmt.Errorf("operator %d (%s): %w", i, op.Name, err)
			}
		}
	}
	return nil
}

// chooseLayouts tells each operator with more than one layout of its
// state (LayoutChooser) which the checkpoint holds.
func (s *Store) chooseLayouts(plan *Plan) error {
	stored, _, err := s.storedMeta()
	if err != nil {
		return err
	}
	for i, op := range plan.Operators {
		if c, ok := op.(LayoutChooser); ok {
			var om *OperatorMeta
			if i < len(stored.Operators) {
				om = &stored.Operators[i]
			}
			if err := c.ChooseLayout(om); err != nil {
				info := op.Info()
				return fmt.Errorf("%w: operator %d (%s %q): %v", ErrIncompatibleCheckpoint, i, info.Kind, info.Name, err)
			}
		}
	}
	return nil
}

// checkStoredWindow compares a window operator op has stored (om says
// what its keys hold) with the windows w of the pipeline starting on it,
// as compareMeta compares described windows: another length is a type
// difference, another start an identity one. Every stored window has the
// operator's length, so the first one read tells a change of it; a
// change of start or slide shows only where that window is none of w's.
// Cumulative windows w are refused: they came after the windows were
// described, so the stored ones are of another kind.
func (s *Store) checkStoredWindow(op int, om OperatorMeta, w WindowsMeta) (identity, types []string, err error) {
	prefix := keyPrefix(om) - 16 // a grouping set's bytes before the window
	windowKeyed := map[uint8]bool{}
	for _, v := range om.Variables {
		// An index's entries (an event-time order) are keyed otherwise.
		windowKeyed[v.ID] = !v.Index && v.Encoding != EncodingByEventTime
	}
	var start, end int64
	found := false
	r := &CheckpointReader{s: s, r: s.db}
	err = r.ScanState(uint8(op), func(e Entry) error {
		if known, ok := windowKeyed[e.Variable]; (ok && !known) || len(e.Key) < prefix+16 {
			return nil
		}
		start = int64(binary.BigEndian.Uint64(e.Key[prefix:]) ^ 1<<63)
		end = int64(binary.BigEndian.Uint64(e.Key[prefix+8:]) ^ 1<<63)
		found = true
		return errStopRows
	})
	if errors.Is(err, errStopRows) {
		err = nil
	}
	if err != nil || !found {
		return nil, nil, err
	}
	where := fmt.Sprintf("operator %d (%s %q)", op, om.Kind, om.Name)
	stored := fmt.Sprintf("[%s, %s)", time.Unix(0, start).UTC().Format(time.RFC3339Nano), time.Unix(0, end).UTC().Format(time.RFC3339Nano))
	if w.Step != 0 {
		// Cumulative windows came after windows were described: these are
		// tumbling or sliding ones, whose full-length windows a
		// cumulative operator would read as its own last ones.
		return nil, []string{fmt.Sprintf("%s: a stored window, %s, is of tumbling or sliding windows (the checkpoint was written before it described its windows), and its windows are now %s: the stored windows are not the query's; start from a new checkpoint directory, or keep the windows", where, stored, w)}, nil
	}
	if w.Check(start, end) == nil {
		return nil, nil, nil
	}
	if end-start != int64(w.Size) {
		return nil, []string{fmt.Sprintf("%s: a stored window, %s, is %s long, and its windows are now %s: the stored windows are not the query's, and their state would be read as the query's windows'; start from a new checkpoint directory, or keep the windows' size", where, stored, time.Duration(end-start), w)}, nil
	}
	return []string{fmt.Sprintf("%s: a stored window, %s, is none of its windows now (%s)", where, stored, w)}, nil, nil
}

// metaChanges are the differences from the checkpoint's pipeline that a
// start accepts: the pipeline's (AllowPipelineChanges), or only the loss
// of the values of state fields that look renamed (AllowStateFieldLoss).
type metaChanges struct {
	pipeline, fieldLoss bool
	// restored says the checkpoint was rebuilt from a copy of its changes
	// (a Restorer's changelog), whose metadata record, written once a
	// run, may have been deleted with the changelog's start: a missing
	// one is then the start's, not damage.
	restored bool
	// policyAsked says the start asked for its watermark policy
	// (MultipleWatermarkPolicy): only then is it warned that the
	// checkpoint keeps another.
	policyAsked bool
}

// dropVariable is a variable whose data the operator deletes.
type dropVariable struct {
	op, id uint8
}

// eventTimeTTL ends the TTL of a variable whose time to live is in event
// time, as VariableMeta records it.
const eventTimeTTL = " (event time)"

// ttlClock is the clock of a variable's time to live as VariableMeta
// records it: "processing time", "event time", or "" for none.
func ttlClock(ttl string) string {
	switch {
	case ttl == "":
		return ""
	case strings.HasSuffix(ttl, eventTimeTTL):
		return "event time"
	}
	return "processing time"
}

// reconcileVariables gives current's variables their stored ids, new ones
// ids no stored variable holds, carries over the stored variables current
// no longer declares, and drops the deleted ones.
func reconcileVariables(op int, stored, current *OperatorMeta) (drop []dropVariable, diffs []string) {
	deleted := map[string]bool{}
	for _, name := range current.deleted {
		deleted[name] = true
	}
	current.deleted = nil
	used := map[uint8]bool{}
	carried := map[string]VariableMeta{}
	for name, v := range stored.Variables {
		if deleted[name] {
			drop = append(drop, dropVariable{uint8(op), v.ID})
			continue
		}
		used[v.ID] = true
		carried[name] = v
	}
	names := make([]string, 0, len(current.Variables))
	for name := range current.Variables {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return int(current.Variables[a].ID) - int(current.Variables[b].ID) })
	next := uint8(0)
	for _, name := range names {
		v := current.Variables[name]
		if old, ok := carried[name]; ok {
			if old.Kind != v.Kind {
				diffs = append(diffs, fmt.Sprintf("operator %d (%s %q): state variable %q was a %s, is now a %s; delete it (DeleteIfExists) or give the new one another name",
					op, current.Kind, current.Name, name, kindName(old.Kind), kindName(v.Kind)))
			}
			if old.ValueType != "" && v.ValueType != "" && !basicReadsAs(old.ValueType, v.ValueType) {
				// A basic type's bytes read as another's are garbage.
				diffs = append(diffs, fmt.Sprintf("operator %d (%s %q): state variable %q held %s values, now holds %s: its stored entries cannot be read as such; delete it (DeleteIfExists) or give the new one another name",
					op, current.Kind, current.Name, name, old.ValueType, v.ValueType))
			}
			if old.MapKeyType != "" && v.MapKeyType != "" && !basicReadsAs(old.MapKeyType, v.MapKeyType) {
				diffs = append(diffs, fmt.Sprintf("operator %d (%s %q): state variable %q had keys of type %s, now of type %s: its stored entries cannot be read as such; delete it (DeleteIfExists) or give the new one another name",
					op, current.Kind, current.Name, name, old.MapKeyType, v.MapKeyType))
			} else if old.MapKey != nil && v.MapKey != nil {
				if diff := keyLayoutChange(old.MapKey, v.MapKey); diff != "" {
					diffs = append(diffs, fmt.Sprintf("operator %d (%s %q): state variable %q: its key %s: %s, and its stored entries would not be found; delete it (DeleteIfExists), give the new one another name, or keep the key's fields",
						op, current.Kind, current.Name, name, v.MapKey.Name, diff))
				}
			}
			oldClock, newClock := old.Expiries, ttlClock(v.TTL)
			if oldClock == "" {
				oldClock = ttlClock(old.TTL)
			}
			if oldClock != "" && newClock != "" && oldClock != newClock {
				// The stored expiries are instants of the other clock, and
				// indexed for its sweeps: compared with this one's they
				// would expire at once or live on, and a list's header
				// could outlive its elements.
				was := strings.TrimSuffix(old.TTL, eventTimeTTL)
				if was == "" {
					was = "taken away since, its entries keeping their expiries"
				}
				diffs = append(diffs, fmt.Sprintf("operator %d (%s %q): state variable %q had a time to live in %s (%s), now in %s (%s): its stored entries expire by the other clock; delete it (DeleteIfExists) or give the new one another name",
					op, current.Kind, current.Name, name, oldClock, was, newClock, strings.TrimSuffix(v.TTL, eventTimeTTL)))
			}
			if newClock == "" {
				v.Expiries = oldClock // what was written keeps its expiry
			}
			if old.Encoding != "" && v.Encoding != "" && old.Encoding != v.Encoding {
				// The same bytes would be read in another layout.
				diffs = append(diffs, fmt.Sprintf("operator %d (%s %q): state variable %q was stored as %q, is now %q: this version cannot read the stored entries; start from a new checkpoint directory, or delete the variable (DeleteIfExists)",
					op, current.Kind, current.Name, name, old.Encoding, v.Encoding))
			}
			// (A checkpoint from before NoMatchFlag was kept flagged
			// every side, but a LeftSemi join's right one.)
			oldUnflagged := old.NoMatchFlag ||
				old.Encoding == EncodingJoinBuffer && name == "right" && strings.HasPrefix(stored.Timeout, "LeftSemi ")
			if oldUnflagged && !v.NoMatchFlag {
				// A row that matched after it was stored says it did
				// not: the join would write it again, padded.
				diffs = append(diffs, fmt.Sprintf("operator %d (%s %q): the stored %s rows do not say whether they had a match (the join did not write them padded, so it did not keep that), and this join writes those without one: start from a new checkpoint directory",
					op, current.Kind, current.Name, name))
			}
			v.ID = old.ID
		} else {
			for used[next] {
				next++
			}
			v.ID = next
			used[next] = true
		}
		carried[name] = v
	}
	// A variable the pipeline no longer declares keeps its data, and its
	// schema, so that one that declares it again is held to it.
	for name := range carried {
		if _, declared := current.Variables[name]; declared {
			continue
		}
		if schema, ok := stored.States[name]; ok {
			if current.States == nil {
				current.States = map[string]*codec.Schema{}
			}
			current.States[name] = schema
		}
	}
	current.Variables = carried
	return drop, diffs
}

func kindName(k string) string {
	if k == "" {
		return "state row"
	}
	return k + " state"
}

func (s *Store) writeMeta(m Meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("streamgen: encode checkpoint metadata: %w", err)
	}
	return s.write("write checkpoint metadata", func() error { return s.db.Set([]byte(metaKey), b, s.startWrites()) })
}

// setsText describes grouping sets of n dimensions, each as given (bit
// i rolls up dimension i) and as Spark's grouping_id() (the first
// dimension the highest bit): "0 (grouping_id 0), 1 (grouping_id 2) of 2
// dimensions". Empty without sets.
func setsText(sets []uint32, n int) string {
	if len(sets) == 0 {
		return ""
	}
	var b strings.Builder
	for i, s := range sets {
		if i > 0 {
			b.WriteString(", ")
		}
		id := bits.Reverse32(s) >> (32 - n)
		fmt.Fprintf(&b, "%d (grouping_id %d)", s, id)
	}
	fmt.Fprintf(&b, " of %d dimensions", n)
	return b.String()
}

// compareMeta lists what differs between stored and current: identity
// lists other sources, operator names, timeouts, output modes, windows'
// starts and sessions' gaps, which an option may accept; types lists other
// operators, key and state types that cannot read the stored bytes, and
// windows of another size, which nothing accepts.
func compareMeta(stored, current Meta) (identity, types []string) {
	if !slices.Equal(stored.Sources, current.Sources) {
		identity = append(identity, fmt.Sprintf("sources were %s, are now %s", quoteList(stored.Sources), quoteList(current.Sources)))
	}
	if len(stored.Operators) != len(current.Operators) {
		types = append(types, fmt.Sprintf("%d stateful operators (%s), now %d (%s)",
			len(stored.Operators), operatorList(stored.Operators), len(current.Operators), operatorList(current.Operators)))
	}
	for i := range min(len(stored.Operators), len(current.Operators)) {
		was, now := stored.Operators[i], current.Operators[i]
		where := fmt.Sprintf("operator %d", i)
		if was.Kind != now.Kind {
			types = append(types, fmt.Sprintf("%s was %s %q, is now %s %q", where, was.Kind, was.Name, now.Kind, now.Name))
			continue
		}
		if was.Name != now.Name {
			identity = append(identity, fmt.Sprintf("%s was %s %q, is now %s %q", where, was.Kind, was.Name, now.Kind, now.Name))
		}
		where = fmt.Sprintf("operator %d (%s %q)", i, now.Kind, now.Name)
		if was.Timeout != now.Timeout {
			identity = append(identity, fmt.Sprintf("%s: timeout was %s, is now %s", where, was.Timeout, now.Timeout))
		}
		if was.OutputMode != now.OutputMode {
			identity = append(identity, fmt.Sprintf("%s: output mode was %s, is now %s", where, was.OutputMode, now.OutputMode))
		}
		if was.Windows != nil && now.Windows != nil && *was.Windows != *now.Windows {
			w, n := was.Windows, now.Windows
			// Cumulative windows' keys are read by the query's periods:
			// another offset would read a stored window as another. And
			// sliding windows' slices are cut by their slide and start:
			// another would read a stored slice into windows that do not
			// hold it whole.
			sliced := false
			for _, v := range was.Variables {
				sliced = sliced || v.Encoding == EncodingSlices
			}
			if w.Size != n.Size || w.Difference != n.Difference || w.Step != n.Step || w.Step != 0 && w.Offset != n.Offset ||
				sliced && (w.Slide != n.Slide || w.Offset != n.Offset) {
				types = append(types, fmt.Sprintf("%s: its windows were %s, are now %s: the stored windows are not the query's, and their state would be read as the query's windows'; start from a new checkpoint directory, or keep the windows' size (and a cumulative one's start, and sliding ones' slide and start, whose slices the checkpoint keeps)", where, was.Windows, now.Windows))
			} else {
				identity = append(identity, fmt.Sprintf("%s: its windows were %s, are now %s", where, was.Windows, now.Windows))
			}
		}
		if was.Sets != "" && now.Sets != "" && was.Sets != now.Sets {
			identity = append(identity, fmt.Sprintf("%s: its grouping sets were %s, are now %s: the stored aggregates of a set no longer asked for would stay (and be written in Complete mode)", where, was.Sets, now.Sets))
		}
		if was.Params != "" && now.Params != "" && was.Params != now.Params {
			identity = append(identity, fmt.Sprintf("%s: it %s, and now %s: its stored state was kept by the old rule", where, was.Params, now.Params))
		}
		if was.Rows != nil && now.Rows != nil {
			// (Another row type is another operator name: an identity
			// change above.)
			if err := codec.Compatible(was.Rows, now.Rows); err != nil {
				types = append(types, fmt.Sprintf("%s: kept rows: %v", where, err))
			}
		}
		switch {
		case was.KeyType != now.KeyType && (now.legacyKeyType == "" || was.KeyType != now.legacyKeyType) && !keyReadsAs(was.KeyType, now.KeyType):
			types = append(types, fmt.Sprintf("%s: key type was %s, is now %s", where, was.KeyType, now.KeyType))
		case was.Key != nil && now.Key != nil:
			// A key record's encoding, ordered or binary, holds its
			// fields: another field, nested or not, another order or
			// kind, addresses other entries.
			if diff := keyLayoutChange(was.Key, now.Key); diff != "" {
				types = append(types, fmt.Sprintf("%s: key %s: %s, and the stored state would not be found under the new keys; start from a new checkpoint directory, or keep the key's fields", where, now.Key.Name, diff))
			} else if err := codec.Compatible(was.Key, now.Key); err != nil {
				types = append(types, fmt.Sprintf("%s: key: %v", where, err))
			}
		}
		for name, schema := range now.States {
			old, ok := was.States[name]
			if !ok || slices.Contains(now.deleted, name) {
				continue // a new state variable starts empty, as one deleted at start does
			}
			if old == nil || schema == nil {
				// A value of a basic type: its type is in the kind.
				if (old == nil) != (schema == nil) {
					types = append(types, fmt.Sprintf("%s: state %q changed between a record and a basic type", where, name))
				}
				continue
			}
			switch {
			case old.Name != schema.Name:
				identity = append(identity, fmt.Sprintf("%s: state %q was of type %s, is now of type %s", where, name, old.Name, schema.Name))
			case !sharesField(old, schema):
				identity = append(identity, fmt.Sprintf("%s: state %q (%s) has no field in common with the stored one", where, name, schema.Name))
			}
			if err := codec.Compatible(old, schema); err != nil {
				types = append(types, fmt.Sprintf("%s: state %q: %v", where, name, err))
			}
		}
	}
	return identity, types
}

// keyReadsAs reports whether keys of the type named was (a KeyType, such
// as "window+int32") read as keys of the type named now: the same
// prefix, and an integer as a wider one of its signedness (every integer
// key is stored in 8 bytes).
func keyReadsAs(was, now string) bool {
	i, j := strings.LastIndexByte(was, '+'), strings.LastIndexByte(now, '+')
	return was[:i+1] == now[:j+1] && basicReadsAs(was[i+1:], now[j+1:])
}

// orderedRecordKey is the KeyType of a record key in its ordered
// encoding (codec.OrderedKey), after the prefix of a window's.
const orderedRecordKey = "orderedRecord"

// basicReadsAs reports whether entries of a basic type named was (as
// reflect names kinds: "int32", "string", "record") read as the type
// named now: the same type, or an integer as a wider one of its
// signedness (every integer is stored in 8 bytes).
func basicReadsAs(was, now string) bool {
	if was == now {
		return true
	}
	width := func(name, prefix string) (int, bool) {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			return 0, false
		}
		if rest == "" {
			return 64, true
		}
		n, err := strconv.Atoi(rest)
		return n, err == nil
	}
	for _, prefix := range []string{"uint", "int"} {
		w, okW := width(was, prefix)
		n, okN := width(now, prefix)
		if okW && okN {
			return n >= w
		}
		if okW || okN {
			return false
		}
	}
	return false
}

// keyLayoutChange describes how now, a key record's schema, encodes
// otherwise than was: another field, another order, another kind, width
// or pointer, at any depth; "" when its keys encode alike.
func keyLayoutChange(was, now *codec.Schema) string {
	if w, n := keyLayout(was), keyLayout(now); w != n {
		return fmt.Sprintf("its fields were (%s), are now (%s)", keyFields(was), keyFields(now))
	}
	return ""
}

// keyLayout is what of s its encoding depends on: each field's id,
// kind, width, pointer and length, and those of its elements, keys and
// nested fields.
func keyLayout(s *codec.Schema) string {
	var b strings.Builder
	var typ func(t *codec.Type)
	fields := func(s *codec.Schema) {
		b.WriteByte('{')
		for _, f := range s.Fields {
			fmt.Fprintf(&b, "%d:", f.ID)
			typ(f.Type)
			b.WriteByte(',')
		}
		b.WriteByte('}')
	}
	typ = func(t *codec.Type) {
		if t == nil {
			return
		}
		bits := t.Bits
		if t.Kind == codec.KindInt || t.Kind == codec.KindUint {
			bits = 0 // a varint of any width
		}
		fmt.Fprintf(&b, "%s/%d/%t/%d", t.Kind, bits, t.Pointer, t.Len)
		if t.Key != nil {
			b.WriteByte('[')
			typ(t.Key)
			b.WriteByte(']')
		}
		if t.Elem != nil {
			b.WriteByte('<')
			typ(t.Elem)
			b.WriteByte('>')
		}
		switch {
		case t.Struct != nil:
			fields(t.Struct)
		case t.Ref != "":
			b.WriteString("@" + t.Ref)
		}
	}
	fields(s)
	return b.String()
}

// keyFields lists the fields of s, with their Go types, for messages.
func keyFields(s *codec.Schema) string {
	var b strings.Builder
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		goType := "?"
		if f.Type != nil {
			goType = f.Type.Go
		}
		fmt.Fprintf(&b, "%s %s", f.Name, goType)
	}
	return b.String()
}

// sharesField reports whether two schemas have a field id in common.
func sharesField(a, b *codec.Schema) bool {
	ids := map[uint32]bool{}
	for _, f := range a.Fields {
		ids[f.ID] = true
	}
	for _, f := range b.Fields {
		if ids[f.ID] {
			return true
		}
	}
	return len(a.Fields) == 0 && len(b.Fields) == 0
}

// renamedFields finds, in each state variable that both describe, a field
// that disappeared while a field of the same type appeared: most likely a
// rename without a pinned id, whose values are lost.
func renamedFields(stored, current Meta) []string {
	var out []string
	for i := range min(len(stored.Operators), len(current.Operators)) {
		was, now := stored.Operators[i], current.Operators[i]
		where := fmt.Sprintf("operator %d (%s %q)", i, now.Kind, now.Name)
		for name, schema := range now.States {
			if !slices.Contains(now.deleted, name) {
				out = append(out, renamedIn(where+fmt.Sprintf(", state %q", name), was.States[name], schema)...)
			}
		}
		out = append(out, renamedIn(where+", kept rows", was.Rows, now.Rows)...)
	}
	return out
}

// renamedIn describes the fields of old, the stored schema at where, that
// current seems to have renamed: a field gone and one of its type new.
func renamedIn(where string, old, current *codec.Schema) []string {
	return renamedWithin(where, old, current, map[[2]*codec.Schema]bool{})
}

// renamedWithin is renamedIn, looking into the structs nested in fields
// both schemas have (in a field, a list or a map), each pair once.
func renamedWithin(where string, old, current *codec.Schema, seen map[[2]*codec.Schema]bool) []string {
	if old == nil || current == nil || seen[[2]*codec.Schema{old, current}] {
		return nil
	}
	seen[[2]*codec.Schema{old, current}] = true
	var out []string
	for _, f := range current.Fields {
		if was, ok := old.Field(f.ID); ok {
			w, n := nestedStruct(was.Type), nestedStruct(f.Type)
			out = append(out, renamedWithin(where+"."+f.Name, w, n, seen)...)
		}
	}
	removed, added := fieldsOnlyIn(old, current), fieldsOnlyIn(current, old)
	for _, f := range added {
		for _, gone := range removed {
			if gone.Type == nil || f.Type == nil || gone.Type.Go != f.Type.Go {
				continue
			}
			out = append(out, fmt.Sprintf(
				"%s: field %s (%s) is gone and field %s of the same type is new: if it was renamed, its stored values are lost; tag %s `stream:\"id=%d\"` to keep them",
				where, gone.Name, gone.Type.Go, f.Name, f.Name, gone.ID))
		}
	}
	return out
}

// nestedStruct returns the struct that t is or holds (as a list's
// elements or a map's values), nil for none or for a reference to a
// recursive type's struct described elsewhere.
func nestedStruct(t *codec.Type) *codec.Schema {
	for t != nil {
		if t.Struct != nil {
			return t.Struct
		}
		t = t.Elem
	}
	return nil
}

// fieldsOnlyIn returns the fields of a whose ids b lacks.
func fieldsOnlyIn(a, b *codec.Schema) []codec.Field {
	ids := map[uint32]bool{}
	for _, f := range b.Fields {
		ids[f.ID] = true
	}
	var out []codec.Field
	for _, f := range a.Fields {
		if !ids[f.ID] {
			out = append(out, f)
		}
	}
	return out
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func operatorList(ops []OperatorMeta) string {
	names := make([]string, len(ops))
	for i, o := range ops {
		names[i] = fmt.Sprintf("%s %q", o.Kind, o.Name)
	}
	return strings.Join(names, ", ")
}
