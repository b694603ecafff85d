package runtime

import (
	"fmt"
	"time"
)

// Trigger says when a query runs its micro-batches.
type Trigger struct {
	kind     triggerKind
	interval time.Duration
}

type triggerKind int

const (
	triggerASAP triggerKind = iota
	triggerInterval
	triggerOnce
	triggerAvailableNow
)

// AsSoonAsPossible starts the next batch as soon as the previous one ends
// and there is new data, a due timer or a watermark to apply: the default.
func AsSoonAsPossible() Trigger { return Trigger{kind: triggerASAP} }

// ProcessingTime starts a batch every interval (a batch that runs longer
// delays the next start, as in Spark).
func ProcessingTime(interval time.Duration) Trigger {
	return Trigger{kind: triggerInterval, interval: interval}
}

// Once runs one batch over everything available at start, then stops.
// A batch that an earlier run planned and did not commit (it failed, or
// the process died) runs first, as planned, and the run's own batch then
// takes what is left.
func Once() Trigger { return Trigger{kind: triggerOnce} }

// AvailableNow processes everything available at start, in as many
// batches as the sources' per-batch limits make, then stops.
func AvailableNow() Trigger { return Trigger{kind: triggerAvailableNow} }

// ParseTrigger reads a trigger as the examples' -trigger flag spells it:
// "availableNow", "once", "asap" or a duration such as "10s".
func ParseTrigger(s string) (Trigger, error) {
	switch s {
	case "availableNow", "available-now":
		return AvailableNow(), nil
	case "once":
		return Once(), nil
	case "asap", "":
		return AsSoonAsPossible(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return Trigger{}, fmt.Errorf("streamgen: trigger %q: want availableNow, once, asap or a positive duration", s)
	}
	return ProcessingTime(d), nil
}

// String names the trigger.
func (t Trigger) String() string {
	switch t.kind {
	case triggerInterval:
		return "ProcessingTime(" + t.interval.String() + ")"
	case triggerOnce:
		return "Once"
	case triggerAvailableNow:
		return "AvailableNow"
	}
	return "AsSoonAsPossible"
}

// stops reports whether the trigger ends the query once its input is done.
func (t Trigger) stops() bool { return t.kind == triggerOnce || t.kind == triggerAvailableNow }

// Stops reports whether the trigger ends the query once the input
// available at start is processed: Once and AvailableNow.
func (t Trigger) Stops() bool { return t.stops() }
