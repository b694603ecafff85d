package runtime

import (
	"strings"
	"testing"
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
