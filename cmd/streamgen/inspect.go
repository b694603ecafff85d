package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

const inspectUsage = `usage: streamgen inspect DIR [--json]
       streamgen inspect DIR state OPERATOR [VARIABLE] [--key K] [--json]
       streamgen inspect DIR timers OPERATOR [--key K] [--json]

inspect reads a query's checkpoint without the query's code, through the
schemas stored in it. It opens the checkpoint read-only; one that a running
query holds is read from a snapshot the query makes on request, and the query
runs on.

The first form lists the operators, their state variables with schemas and
row counts, the timers, the watermark, the sources' offsets and the progress
reports of the latest batches (the checkpoint keeps 20). The second prints the state rows of OPERATOR
(its index, or its name) decoded as JSON: of every variable, or of VARIABLE;
--key K reads the rows of grouping key K alone (as the rows show it, its
members in any order, or a string without its quotes; a record key by
its fields' Go names or their JSON names); --json prints one JSON object per row. The third
prints OPERATOR's timers, by expiry, with their keys.
`

// runInspect is streamgen inspect.
func runInspect(args []string, stdout, stderr io.Writer) int {
	var positional []string
	var key string
	hasKey, asJSON := false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-h" || a == "-help" || a == "--help":
			fmt.Fprint(stdout, inspectUsage)
			return 0
		case a == "--json" || a == "-json":
			asJSON = true
		case a == "--key" || a == "-key":
			if i+1 == len(args) {
				fmt.Fprintf(stderr, "streamgen inspect: %s needs a value\n%s", a, inspectUsage)
				return 2
			}
			i++
			key, hasKey = args[i], true
		case strings.HasPrefix(a, "--key=") || strings.HasPrefix(a, "-key="):
			_, key, _ = strings.Cut(a, "=")
			hasKey = true
		case strings.HasPrefix(a, "-") && a != "-":
			fmt.Fprintf(stderr, "streamgen inspect: unknown flag %s\n%s", a, inspectUsage)
			return 2
		default:
			positional = append(positional, a)
		}
	}
	var err error
	switch {
	case len(positional) == 1 && !hasKey:
		err = inspectSummary(positional[0], asJSON, stdout)
	case len(positional) >= 3 && len(positional) <= 4 && positional[1] == "state":
		variable := ""
		if len(positional) == 4 {
			variable = positional[3]
		}
		err = inspectState(positional[0], positional[2], variable, key, hasKey, asJSON, stdout)
	case len(positional) == 3 && positional[1] == "timers":
		err = inspectTimers(positional[0], positional[2], key, hasKey, asJSON, stdout)
	default:
		fmt.Fprint(stderr, inspectUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func inspectSummary(dir string, asJSON bool, stdout io.Writer) error {
	c, err := runtime.OpenCheckpoint(dir)
	if err != nil {
		return err
	}
	defer c.Close()
	sum, err := c.Summary()
	if err != nil {
		return err
	}
	if asJSON {
		b, err := json.MarshalIndent(sum, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "checkpoint\t%s\n", sum.Dir)
	if c.Live() {
		fmt.Fprintf(w, "\ta query runs on it: this is a snapshot of it, taken now\n")
	}
	if !sum.HasMeta {
		fmt.Fprintf(w, "\tno query has started on it\n")
		return w.Flush()
	}
	fmt.Fprintf(w, "query id\t%s\n", sum.Meta.ID)
	if !sum.Created.IsZero() {
		fmt.Fprintf(w, "created\t%s\n", sum.Created.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "format\t%d\n", sum.Meta.Format)
	if sum.Progress.BatchID < 0 {
		fmt.Fprintf(w, "last batch\tnone committed\n")
	} else {
		fmt.Fprintf(w, "last batch\t%d\n", sum.Progress.BatchID)
	}
	next := sum.NextWatermark
	if p := sum.Planned; p != nil {
		state := "not committed: it runs again at the next start, on the same input"
		if c.Live() {
			state = "running now"
		}
		fmt.Fprintf(w, "planned\tbatch %d, %s\n", p.BatchID, state)
		if !p.Now.IsZero() {
			fmt.Fprintf(w, "  processing time\t%s\n", instant(p.Now))
			next = p.Watermark
		}
	}
	fmt.Fprintf(w, "watermark\t%s in the last batch, %s for the next\n", instant(sum.Progress.Watermark), instant(next))
	for _, part := range sortedKeys(sum.Progress.PartitionWatermarks) {
		active, _ := sum.Progress.LastActiveOf(part)
		fmt.Fprintf(w, "  partition %s\t%s (last active %s)\n", part, instant(sum.Progress.PartitionWatermarks[part]), instant(active))
	}
	fmt.Fprintf(w, "sources\t\n")
	for _, name := range sum.Meta.Sources {
		fmt.Fprintf(w, "  %s\toffset %s\n", name, offsetText(sum.Progress.Offsets[name]))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(sum.Recent) > 0 {
		fmt.Fprintf(stdout, "\nrecent batches\n")
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(w, "batch\tstarted\trows in\trows/s\tms\trows out\tdead letters\tstate rows\t\n")
		for _, r := range sum.Recent {
			var state int64
			for _, op := range r.StateOperators {
				state += op.NumRowsTotal
			}
			fmt.Fprintf(w, "%d\t%s\t%d\t%.0f\t%d\t%s\t%d\t%d\t\n", r.BatchID, r.Timestamp.UTC().Format(time.RFC3339), r.NumInputRows,
				r.ProcessedRowsPerSecond, r.DurationMs[runtime.DurationTriggerExecution], r.OutputRows(), r.NumDeadLetters, state)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	for _, op := range sum.Operators {
		fmt.Fprintf(stdout, "\noperator %d: %s %q\n", op.Index, op.Meta.Kind, op.Meta.Name)
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		if op.Meta.Timeout != "" {
			fmt.Fprintf(w, "  timeout\t%s\n", op.Meta.Timeout)
		}
		if op.Meta.OutputMode != "" {
			fmt.Fprintf(w, "  output mode\t%s\n", op.Meta.OutputMode)
		}
		if op.Meta.Key != nil {
			fmt.Fprintf(w, "  key\t%s\n", op.Meta.Key)
		} else {
			fmt.Fprintf(w, "  key\t%s\n", op.Meta.KeyType)
		}
		if op.Meta.Windows != nil {
			fmt.Fprintf(w, "  windows\t%s\n", op.Meta.Windows)
		}
		if op.Meta.Params != "" {
			fmt.Fprintf(w, "  aggregator\t%s\n", op.Meta.Params)
		}
		if op.Meta.Rows != nil {
			fmt.Fprintf(w, "  kept rows\t%s\n", op.Meta.Rows)
		}
		if h := sum.Progress.HeldWatermarks; op.Index < len(h) && !h[op.Index].IsZero() {
			fmt.Fprintf(w, "  watermark\t%s in the last batch, held behind the query's: an operator before it left windows to close to the next batches\n", instant(h[op.Index]))
		}
		fmt.Fprintf(w, "  state rows\t%d\n", op.StateRows)
		timers := strconv.FormatInt(op.Timers, 10)
		if op.FirstTimer != nil {
			timers += fmt.Sprintf(" (first %s, last %s)", instant(*op.FirstTimer), instant(*op.LastTimer))
		}
		fmt.Fprintf(w, "  timers\t%s\n", timers)
		for _, v := range op.Variables {
			kind := v.Meta.Kind
			if kind == "" {
				kind = "row"
			}
			if v.Meta.Index {
				// Not a variable of rows to show: the operator's
				// index of its other state.
				fmt.Fprintf(w, "  index %q\t%d entries, of the other state's rows\n", v.Name, v.Entries)
				continue
			}
			fmt.Fprintf(w, "  state %q\t%s, %d keys, %d entries", v.Name, kind, v.Keys, v.Entries)
			if v.Meta.TTL != "" {
				fmt.Fprintf(w, ", ttl %s", v.Meta.TTL)
			}
			fmt.Fprintln(w)
			if s := op.Meta.States[v.Name]; s != nil {
				fmt.Fprintf(w, "    value\t%s\n", s)
			} else if v.Meta.ValueType != "" {
				fmt.Fprintf(w, "    value\t%s\n", v.Meta.ValueType)
			}
			if v.Meta.MapKey != nil {
				fmt.Fprintf(w, "    map key\t%s\n", v.Meta.MapKey)
			} else if v.Meta.MapKeyType != "" {
				fmt.Fprintf(w, "    map key\t%s\n", v.Meta.MapKeyType)
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func inspectState(dir, operator, variable, key string, hasKey, asJSON bool, stdout io.Writer) error {
	c, err := runtime.OpenCheckpoint(dir)
	if err != nil {
		return err
	}
	defer c.Close()
	m, ok, err := c.Meta()
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("streamgen: checkpoint %s: no query has started on it", dir)
	}
	op, err := findOperator(m, operator)
	if err != nil {
		return err
	}
	var stored []byte
	if hasKey {
		if stored, err = parseKeyArg(c, op, key); err != nil {
			return err
		}
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(w, "KEY\tVARIABLE\tENTRY\tEXPIRES\tVALUE")
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	show := func(r runtime.StateRow) error {
		if asJSON {
			return enc.Encode(r)
		}
		entry, expires := "", ""
		switch {
		case r.Index != nil:
			entry = strconv.FormatUint(*r.Index, 10)
		case r.MapKey != nil:
			entry = string(r.MapKey)
		case r.EventTime != nil: // a join's buffered row
			entry = instant(*r.EventTime)
			if r.Matched != nil {
				entry += map[bool]string{true: " matched", false: " not matched"}[*r.Matched]
			}
		}
		switch {
		case r.ExpiresAt != nil:
			expires = instant(*r.ExpiresAt)
		case r.Timeout != nil:
			expires = "timeout " + instant(*r.Timeout)
		}
		_, err := fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Key, r.Variable, entry, expires, r.Value)
		return err
	}
	if hasKey {
		// The key's rows alone, found by the key as the store holds it.
		ans, err := c.Lookup(runtime.StateRequest{Operator: strconv.Itoa(op), Variable: variable, Limit: math.MaxInt}, stored)
		if err != nil {
			return err
		}
		for _, r := range ans.Rows {
			if err := show(r); err != nil {
				return err
			}
		}
	} else if err := c.Rows(m, op, variable, show); err != nil {
		return err
	}
	if asJSON {
		return nil
	}
	return w.Flush()
}

func inspectTimers(dir, operator, key string, hasKey, asJSON bool, stdout io.Writer) error {
	c, err := runtime.OpenCheckpoint(dir)
	if err != nil {
		return err
	}
	defer c.Close()
	m, ok, err := c.Meta()
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("streamgen: checkpoint %s: no query has started on it", dir)
	}
	op, err := findOperator(m, operator)
	if err != nil {
		return err
	}
	var stored []byte
	if hasKey {
		if stored, err = parseKeyArg(c, op, key); err != nil {
			return err
		}
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(w, "KEY\tAT")
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	err = c.Timers(uint8(op), func(t runtime.StoredTimer) error {
		if hasKey && !bytes.Equal(t.Key, stored) {
			return nil
		}
		k, err := runtime.KeyJSON(m.Operators[op], t.Key)
		if err != nil {
			return fmt.Errorf("streamgen: operator %d: a timer's key %x: %w", op, t.Key, err)
		}
		if asJSON {
			return enc.Encode(struct {
				Partition uint32          `json:"partition"`
				Key       json.RawMessage `json:"key"`
				At        time.Time       `json:"at"`
			}{t.Partition, k, t.At})
		}
		_, err = fmt.Fprintf(w, "%s\t%s\n", k, instant(t.At))
		return err
	})
	if err != nil || asJSON {
		return err
	}
	return w.Flush()
}

// parseKeyArg reads the key of --key for operator op as the checkpoint
// stores it: JSON as the rows show the key (members in any order, any
// spacing), or a string key without its quotes. A key that is none of
// the operator's is an error saying why, not a listing of no rows.
func parseKeyArg(c *runtime.CheckpointReader, op int, key string) ([]byte, error) {
	operator := strconv.Itoa(op)
	var jsonErr error
	if trimmed := strings.TrimSpace(key); strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") {
		// Meant as JSON: its syntax error says more than its reading as
		// a string key would.
		var v any
		if err := json.Unmarshal([]byte(key), &v); err != nil {
			return nil, fmt.Errorf("streamgen: --key %s: %w", key, err)
		}
	}
	if json.Valid([]byte(key)) {
		stored, err := c.ParseKey(operator, json.RawMessage(key))
		if err == nil {
			return stored, nil
		}
		jsonErr = err
	}
	quoted, _ := json.Marshal(key)
	stored, err := c.ParseKey(operator, quoted)
	if err == nil {
		return stored, nil
	}
	if jsonErr != nil {
		err = jsonErr
	}
	return nil, fmt.Errorf("streamgen: --key: %w", err)
}

// findOperator finds an operator by index, name or kind.
func findOperator(m runtime.Meta, operator string) (int, error) {
	if i, err := strconv.Atoi(operator); err == nil {
		if i < 0 || i >= len(m.Operators) {
			return 0, fmt.Errorf("streamgen: the checkpoint has no operator %d (it has %d)", i, len(m.Operators))
		}
		return i, nil
	}
	found := -1
	for i, om := range m.Operators {
		if om.Name == operator || om.Kind == operator {
			if found >= 0 {
				return 0, fmt.Errorf("streamgen: %q names more than one operator: give its index", operator)
			}
			found = i
		}
	}
	if found < 0 {
		var names []string
		for i, om := range m.Operators {
			names = append(names, fmt.Sprintf("%d (%s %q)", i, om.Kind, om.Name))
		}
		return 0, errors.New("streamgen: the checkpoint has no operator " + strconv.Quote(operator) + "; it has " + strings.Join(names, ", "))
	}
	return found, nil
}

// instant shows an instant, or "none" for the zero time.
func instant(t time.Time) string {
	switch {
	case t.IsZero():
		return "none"
	case t.Equal(runtime.EndOfTime):
		return "end of time (flushed)"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// offsetText shows an offset: a files source's as the batch's files and
// the size of its log, anything else as its JSON, cut short when long.
func offsetText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "none"
	}
	var files struct {
		Files []string         `json:"files"`
		Seen  map[string]int64 `json:"seen"`
	}
	if raw[0] == '{' && json.Unmarshal(raw, &files) == nil && files.Files != nil {
		return fmt.Sprintf("last batch's files %s, %d files remembered", shorten(fmt.Sprintf("%q", files.Files), 200), len(files.Seen))
	}
	return shorten(string(raw), 200)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… (%d bytes)", len(s))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
