package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the module's root, two levels up.
const repoRoot = "../.."

// goGenerateLine is the go:generate line of this program.
func goGenerateLine(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^//go:generate .*$`).Find(b)
	if line == nil {
		t.Fatal("main.go has no go:generate line")
	}
	return string(line)
}

// TestGoGenerateLineEverywhere: the README, streamgen's package doc and
// usage, and every example say the same go:generate line as this program.
func TestGoGenerateLineEverywhere(t *testing.T) {
	want := goGenerateLine(t)
	files := map[string]int{"README.md": 2, "cmd/streamgen/main.go": 2} // the least each says it
	examples, _ := filepath.Glob(filepath.Join(repoRoot, "examples", "*", "*.go"))
	for _, f := range examples {
		if rel, _ := filepath.Rel(repoRoot, f); !strings.HasSuffix(rel, "_test.go") {
			files[rel] = 0
		}
	}
	for f, least := range files {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			// A directive, or one quoted in a comment or a usage text.
			i := strings.Index(line, "//go:generate")
			if i < 0 {
				continue
			}
			n++
			if got := strings.TrimSpace(line[i:]); got != want {
				t.Errorf("%s: %q, want %q", f, got, want)
			}
		}
		if n < least {
			t.Errorf("%s says the go:generate line %d times, want at least %d", f, n, least)
		}
	}
}

// TestREADMESetUpInNewModule runs the README's steps "In your module" as
// written, in a new module in a temporary directory: go mod init, go work
// init with this repository as the clone, this program as main.go, go
// generate, go run; with the environment's module proxy, as a user runs
// them (a workspace loads the go.mod files of the whole module graph,
// which building the repository alone does not download).
func TestREADMESetUpInNewModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a new module")
	}
	steps := readmeSteps(t)
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "GOFLAGS=", "GOWORK=")
	sh := func(cmd string) string {
		t.Helper()
		c := exec.Command("sh", "-c", cmd)
		c.Dir, c.Env = dir, env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	var out string
	wrote := false
	for _, step := range steps {
		switch {
		case strings.HasPrefix(step, "mkdir "):
			continue // mkdir clicks && cd clicks: the test's directory
		case strings.HasPrefix(step, "go work init "):
			// This repository is the clone.
			step = strings.ReplaceAll(step, "../streamgen", root)
		case strings.HasPrefix(step, "go generate"):
			src, err := os.ReadFile("main.go")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
				t.Fatal(err)
			}
			wrote = true
		case step == "go run .":
			step += " -dir " + filepath.Join(dir, "work")
		}
		out = sh(step)
	}
	if !wrote {
		t.Fatalf("the README's steps %q have no go generate", steps)
	}
	if _, err := os.Stat(filepath.Join(dir, "streamgen_gen.go")); err != nil {
		t.Errorf("go generate wrote no streamgen_gen.go: %v", err)
	}
	if !strings.Contains(out, `"user":"ana"`) {
		t.Errorf("go run . printed:\n%s", out)
	}
}

// readmeSteps returns the commands of the README's block under "In your
// module", without comments.
func readmeSteps(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []string
	section, block := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			section = line == "## In your module"
		case section && strings.HasPrefix(line, "```"):
			if block {
				return steps
			}
			block = true
		case section && block:
			cmd, _, _ := strings.Cut(line, "#")
			cmd = strings.TrimSpace(cmd)
			if cmd == "" {
				continue
			}
			steps = append(steps, cmd)
		}
	}
	t.Fatal("the README has no command block under \"## In your module\"")
	return nil
}

// TestREADMEShowsThisProgram: every line of the README's excerpt of this
// program, under "A first program", is a line of main.go, but for the
// lines it elides ("...", "{ ... }"): the excerpt a reader copies from compiles as
// the program does.
func TestREADMEShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for line := range strings.Lines(string(src)) {
		have[strings.TrimSpace(line)] = true
	}
	_, section, ok := strings.Cut(string(readme), "\n## A first program\n")
	if !ok {
		t.Fatal(`the README has no section "A first program"`)
	}
	_, block, ok := strings.Cut(section, "```go\n")
	block, _, closed := strings.Cut(block, "\n```")
	if !ok || !closed {
		t.Fatal(`the README's "A first program" has no Go block`)
	}
	checked := 0
	for line := range strings.Lines(block) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "//") && !strings.HasPrefix(line, "//go:") && !strings.HasPrefix(line, "//streamgen:") {
			continue // a comment may be the README's own
		}
		if code, _, ok := strings.Cut(line, " // "); ok {
			line = strings.TrimSpace(code)
		}
		if line == "" || line == "..." || strings.Contains(line, "{ ... }") {
			continue // elided by the README
		}
		checked++
		if !have[line] && !haveCode(have, line) {
			t.Errorf("the README shows %q, which main.go does not have", line)
		}
	}
	if checked < 20 {
		t.Fatalf("%d lines of the README's excerpt checked", checked)
	}
}

// haveCode reports whether one of the lines in have is code, a comment
// after it left out.
func haveCode(have map[string]bool, code string) bool {
	for line := range have {
		if c, _, ok := strings.Cut(line, " // "); ok && strings.TrimSpace(c) == code {
			return true
		}
	}
	return false
}
