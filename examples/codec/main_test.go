package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/generated/sensor"
)

// TestCounts compares the table with counts made by a plain loop over the
// same lines decoded by encoding/json, and checks that the bad lines reach
// the dead-letter file with their positions.
func TestCounts(t *testing.T) {
	in := t.TempDir()
	var good bytes.Buffer
	want := map[string]int{}
	for _, l := range sample() {
		type plain sensor.Event
		var ev plain
		if json.Unmarshal(l.text, &ev) != nil {
			continue
		}
		want[ev.User+" "+ev.Activity]++
		good.Write(l.text)
		good.WriteByte('\n')
	}
	os.WriteFile(filepath.Join(in, "a.jsonl"), good.Bytes(), 0o644)
	os.WriteFile(filepath.Join(in, "b.json"), []byte("not json\n{\"Index\": 1.5}\n"), 0o644)
	dlq := t.TempDir()
	var out, errOut bytes.Buffer
	if err := run(in, dlq, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for k, n := range want {
		f := strings.Fields(k)
		row := f[0] + "|" + f[1]
		found := false
		for _, line := range strings.Split(out.String(), "\n") {
			cols := strings.Split(line, "|")
			if len(cols) >= 3 && strings.TrimSpace(cols[0])+"|"+strings.TrimSpace(cols[1]) == row {
				found = strings.TrimSpace(cols[2]) == itoa(n)
			}
		}
		if !found {
			t.Errorf("no row %s with %d readings in:\n%s", row, n, out.String())
		}
	}
	dead, _ := os.ReadFile(filepath.Join(dlq, "dead-letter.jsonl"))
	if got := strings.Count(string(dead), "\n"); got != 2 || !strings.Contains(string(dead), `"line":1`) || !strings.Contains(string(dead), `"line":2`) {
		t.Errorf("dead-letter file:\n%s", dead)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
