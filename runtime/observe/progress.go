package observe

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/streamgen/streamgen/runtime"
)

// Progress is the option that prints a query's progress to w, for a
// program run by hand: a line a batch (its number, the rows read, written,
// late and that did not decode, the input rate and the watermark), and a
// line when the query ends. On a terminal the batch line is redrawn in
// place instead. Each query it is given to prints under its name (set
// with runtime.Name), or its id.
//
//	q, err := w.Start(ctx, runtime.Name("sessions"), observe.Progress(os.Stderr))
func Progress(w io.Writer) runtime.Option {
	p := &progressLine{w: w, names: map[string]string{}}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.inPlace = true
	}
	return runtime.Listener(p)
}

// progressLine is Progress's listener; the queries' goroutines call it.
type progressLine struct {
	mu      sync.Mutex
	w       io.Writer
	inPlace bool
	drawn   bool // a line is drawn in place, not ended
	names   map[string]string
}

func (p *progressLine) OnQueryStarted(e runtime.QueryStarted) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name := e.Name
	if name == "" {
		name = e.ID
	}
	p.names[e.ID] = name
	p.end()
	fmt.Fprintf(p.w, "%s: started (run %s)\n", name, e.RunID)
}

func (p *progressLine) OnQueryProgress(r runtime.QueryProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	late := int64(0)
	for _, op := range r.StateOperators {
		late += op.NumRowsDroppedByWatermark
	}
	line := fmt.Sprintf("%s: batch %d: %d rows in (%.0f/s), %s out, %d late, %d dead letters", p.name(r.ID, r.Name),
		r.BatchID, r.NumInputRows, r.InputRowsPerSecond, r.OutputRows(), late, r.NumDeadLetters)
	if r.EventTime != nil && r.EventTime["watermark"] != "" {
		line += ", watermark " + r.EventTime["watermark"]
	}
	if p.inPlace {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.drawn = true
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progressLine) OnQueryTerminated(e runtime.QueryTerminated) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.end()
	name := p.name(e.ID, "")
	if e.Err != nil {
		fmt.Fprintf(p.w, "%s: failed at %s: %v\n", name, time.Now().Format(time.TimeOnly), e.Err)
		return
	}
	fmt.Fprintf(p.w, "%s: stopped\n", name)
}

// name is the query's name, as it started, or as its report says.
func (p *progressLine) name(id, name string) string {
	if n, ok := p.names[id]; ok {
		return n
	}
	if name != "" {
		return name
	}
	return id
}

// end ends a line drawn in place.
func (p *progressLine) end() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}
