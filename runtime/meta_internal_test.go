package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/codec"
)

// TestJoinFlagsOfAnOlderCheckpoint: a checkpoint written before a join
// said which sides keep their rows' matched flags (NoMatchFlag) kept them
// on every side but a LeftSemi join's right one, whose rows were never
// flagged when they matched later: a join that writes that side padded
// refuses it, as it refuses a side stored without them; the other sides
// of such a checkpoint are taken as flagged.
func TestJoinFlagsOfAnOlderCheckpoint(t *testing.T) {
	sides := func(timeout string, leftUnflagged, rightUnflagged bool) OperatorMeta {
		return OperatorMeta{Kind: "symmetricHashJoin", Name: "j", Timeout: timeout, Variables: map[string]VariableMeta{
			"left":  {ID: 0, Kind: "list", Encoding: EncodingJoinBuffer, NoMatchFlag: leftUnflagged},
			"right": {ID: 1, Kind: "list", Encoding: EncodingJoinBuffer, NoMatchFlag: rightUnflagged},
		}}
	}
	for _, tc := range []struct {
		stored, now OperatorMeta
		refused     string // the side the refusal names, or ""
	}{
		// Written before NoMatchFlag: no side says it lacks flags.
		{sides("LeftSemi right watermark", false, false), sides("RightOuter right watermark", true, false), "right"},
		{sides("LeftSemi right watermark", false, false), sides("LeftOuter right watermark", false, true), ""},
		{sides("Inner left and right watermarks", false, false), sides("FullOuter left and right watermarks", false, false), ""},
		// Written since.
		{sides("Inner left and right watermarks", true, true), sides("LeftOuter left and right watermarks", false, true), "left"},
		{sides("FullOuter left and right watermarks", false, false), sides("LeftOuter left and right watermarks", false, true), ""},
	} {
		stored, now := tc.stored, tc.now
		_, diffs := reconcileVariables(0, &stored, &now)
		text := strings.Join(diffs, "\n")
		switch {
		case tc.refused == "" && text != "":
			t.Errorf("%s then %s: refused: %s", tc.stored.Timeout, tc.now.Timeout, text)
		case tc.refused != "" && !strings.Contains(text, "the stored "+tc.refused+" rows do not say whether they had a match"):
			t.Errorf("%s then %s: %q, want the %s rows refused", tc.stored.Timeout, tc.now.Timeout, text, tc.refused)
		}
	}
}

// TestStoredMetaMissingTypes: stored metadata whose state schema lacks a
// field's type (or a list's element, a map's key, a struct's fields),
// which the generator never writes, is refused at start as corrupt, not
// compared (which would dereference the missing type).
func TestStoredMetaMissingTypes(t *testing.T) {
	state := &codec.Schema{Name: "x.Counter", Fields: []codec.Field{
		{Name: "Count", ID: 1, Type: &codec.Type{Kind: codec.KindInt, Go: "int64", Bits: 64}},
		{Name: "Tags", ID: 2, Type: &codec.Type{Kind: codec.KindList, Go: "[]string", Elem: &codec.Type{Kind: codec.KindString, Go: "string"}}},
	}}
	good := Meta{Format: FormatVersion, ID: "q", Sources: []string{"s"}, Operators: []OperatorMeta{{Kind: "mapGroupsWithState", Name: "counts",
		KeyType: "string", States: map[string]*codec.Schema{"counter": state}}}}
	encoded, err := json.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cut, want string }{
		{`,"type":{"kind":"int","go":"int64","bits":64}`, "x.Counter.Count: no type"},
		{`,"elem":{"kind":"string","go":"string"}`, "x.Counter.Tags[]: no type"},
	} {
		damaged := strings.Replace(string(encoded), c.cut, "", 1)
		if damaged == string(encoded) {
			t.Fatalf("%q is not in %s", c.cut, encoded)
		}
		s, err := OpenStore("ckpt", StoreOptions{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.db.Set([]byte(metaKey), []byte(damaged), nil); err != nil {
			t.Fatal(err)
		}
		_, err = s.checkMeta(good, metaChanges{}, func(string) {})
		if !errors.Is(err, ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "its metadata is corrupt") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("without %s: %v; want the metadata refused as corrupt, saying %q", c.cut, err, c.want)
		}
		s.Close()
	}
}

// TestCorruptPlanRefusedAtStart: a checkpoint whose planned batch (the
// plan of a batch to run again) does not decode is refused by Start, as
// corrupt, rather than by the loop once the query runs.
func TestCorruptPlanRefusedAtStart(t *testing.T) {
	fs := vfs.NewMem()
	plan := func() *Plan {
		return &Plan{Inputs: []Input{{Source: &emptySource{}}},
			Outputs: []Output{{Description: "none", Write: func(context.Context, *Batch) (int64, error) { return 0, nil }}}}
	}
	q, err := Start(context.Background(), plan(), FileSystem(fs), Checkpoint("ckpt"), WithTrigger(Once()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore("ckpt", StoreOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set([]byte(planKey), []byte("{garbage"), nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Start(context.Background(), plan(), FileSystem(fs), Checkpoint("ckpt"), WithTrigger(Once()))
	if !errors.Is(err, ErrCorruptCheckpoint) || !strings.Contains(err.Error(), "the planned batch is corrupt") {
		t.Fatalf("Start on a corrupt plan: %v", err)
	}
}

// TestMissingMetaRefusedAtStart: a checkpoint that has committed batches
// but lost its metadata (the pipeline's description, written before the
// first batch) is damaged: Start refuses it, rather than take it for a
// new checkpoint and its state for this pipeline's unchecked. One
// rebuilt from a changelog (which may have lost the record with its
// start) is not refused: see TestAppStandbyBelowLogStart.
func TestMissingMetaRefusedAtStart(t *testing.T) {
	fs := vfs.NewMem()
	plan := func() *Plan {
		return &Plan{Inputs: []Input{{Source: &emptySource{}}},
			Outputs: []Output{{Description: "none", Write: func(context.Context, *Batch) (int64, error) { return 0, nil }}}}
	}
	start := func() error {
		q, err := Start(context.Background(), plan(), FileSystem(fs), Checkpoint("ckpt"), WithTrigger(Once()))
		if err != nil {
			return err
		}
		return q.AwaitTermination()
	}
	if err := start(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore("ckpt", StoreOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(s.NewBatch(), Progress{BatchID: 1}); err != nil { // as two batches would
		t.Fatal(err)
	}
	s.Close()
	if err := start(); err != nil {
		t.Fatalf("a checkpoint with its metadata: %v", err)
	}
	if s, err = OpenStore("ckpt", StoreOptions{FS: fs}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Delete([]byte(metaKey), nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	err = start()
	if !errors.Is(err, ErrCorruptCheckpoint) || !strings.Contains(err.Error(), "its metadata (the pipeline's description) is missing, though it has committed batches (the last, 1)") {
		t.Fatalf("Start on a checkpoint without its metadata: %v", err)
	}
}

// emptySource is a source with nothing to read.
type emptySource struct{}

func (*emptySource) Name() string                                       { return "empty" }
func (*emptySource) Available(context.Context) (json.RawMessage, error) { return nil, nil }
func (*emptySource) Next(_ context.Context, committed, _ json.RawMessage, _ ReadLimit) (json.RawMessage, error) {
	return committed, nil
}
func (*emptySource) Read(context.Context, json.RawMessage, json.RawMessage, func(Record) error) error {
	return nil
}

// TestNoDirectoryChangesOnceFailed: once the store has failed, Pebble's
// file system refuses to make, rename, link or remove files (Pebble goes
// on after an error it deems fatal, and its next steps could delete the
// log that holds committed batches), and lets reads and writes to files
// already open through.
func TestNoDirectoryChangesOnceFailed(t *testing.T) {
	s, err := OpenStore("ckpt", StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fs := s.pebbleOptions(nil, false, false).FS
	f, err := fs.Create("ckpt/a", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatalf("before the failure: %v", err)
	}
	s.fail(errors.New("a fatal error"))
	if _, err := f.Write([]byte("x")); err != nil {
		t.Errorf("a write to a file open: %v", err)
	}
	f.Close()
	for what, err := range map[string]error{
		"create": func() error { _, err := fs.Create("ckpt/b", vfs.WriteCategoryUnspecified); return err }(),
		"remove": fs.Remove("ckpt/a"),
		"rename": fs.Rename("ckpt/a", "ckpt/c"),
		"link":   fs.Link("ckpt/a", "ckpt/d"),
	} {
		if !errors.Is(err, ErrStoreFailed) {
			t.Errorf("%s once failed: %v, want the store's failure", what, err)
		}
	}
	if _, err := fs.Stat("ckpt/a"); err != nil {
		t.Errorf("a's stat once failed: %v", err)
	}
}

// TestStoredWatermarkPolicy: a start keeps the checkpoint's watermark
// policy, warning when it asked for another (not when it asked for none); a checkpoint written before
// the policy was kept takes the start's; a policy that is neither is
// refused as corrupt.
func TestStoredWatermarkPolicy(t *testing.T) {
	meta := func(policy string) Meta {
		return Meta{Format: FormatVersion, ID: "q", Sources: []string{"s"}, WatermarkPolicy: policy}
	}
	for _, c := range []struct {
		stored, asked, want, warned, refused string
		byDefault                            bool // the start did not ask: asked is the default
	}{
		{stored: "max", asked: "min", want: "max", warned: `MultipleWatermarkPolicy "max", which it keeps: this start's "min" is not used`},
		{stored: "max", asked: "min", want: "max", byDefault: true},
		{stored: "min", asked: "max", want: "min", warned: `MultipleWatermarkPolicy "min", which it keeps`},
		{stored: "max", asked: "max", want: "max"},
		{stored: "", asked: "max", want: "max"},
		{stored: "median", asked: "min", refused: `its metadata is corrupt: watermark policy "median"`},
	} {
		s, err := OpenStore("ckpt", StoreOptions{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		stored, _ := json.Marshal(meta(c.stored))
		if err := s.db.Set([]byte(metaKey), stored, nil); err != nil {
			t.Fatal(err)
		}
		var warnings []string
		got, err := s.checkMeta(meta(c.asked), metaChanges{policyAsked: !c.byDefault}, func(w string) { warnings = append(warnings, w) })
		switch {
		case c.refused != "":
			if !errors.Is(err, ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), c.refused) {
				t.Errorf("stored %q: %v; want it refused, saying %q", c.stored, err, c.refused)
			}
		case err != nil:
			t.Errorf("stored %q, asked %q: %v", c.stored, c.asked, err)
		case got.WatermarkPolicy != c.want:
			t.Errorf("stored %q, asked %q: policy %q, want %q", c.stored, c.asked, got.WatermarkPolicy, c.want)
		case (c.warned == "") != (len(warnings) == 0) || c.warned != "" && !strings.Contains(warnings[0], c.warned):
			t.Errorf("stored %q, asked %q: warnings %q, want one saying %q", c.stored, c.asked, warnings, c.warned)
		}
		if err == nil {
			if kept, _, _ := s.storedMeta(); kept.WatermarkPolicy != c.want {
				t.Errorf("stored %q, asked %q: the checkpoint now says %q, want %q", c.stored, c.asked, kept.WatermarkPolicy, c.want)
			}
		}
		s.Close()
	}
}
