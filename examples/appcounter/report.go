package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
)

// report prints what the query wrote, batch by batch, once Kafka has
// acknowledged it. The query calls it from its goroutine only, so it
// needs no lock.
type report struct {
	w                   io.Writer
	output, deadLetters string
	apps, letters       int
}

// printedSink is the Kafka sink of the enriched requests, printing each
// batch after it is written.
type printedSink struct {
	*kafka.TopicSink[App]
	report *report
}

func (s *printedSink) Write(ctx context.Context, batchID int64, rows []App) error {
	if err := s.TopicSink.Write(ctx, batchID, rows); err != nil {
		return err
	}
	return s.report.printApps(batchID, rows)
}

// printedDeadLetters is the dead-letter topic, printing each batch's
// letters after they are written.
type printedDeadLetters struct {
	*kafka.DeadLetterWriter
	report *report
}

func (d *printedDeadLetters) WriteDeadLetters(ctx context.Context, batchID int64, letters []runtime.DeadLetter) error {
	if err := d.DeadLetterWriter.WriteDeadLetters(ctx, batchID, letters); err != nil {
		return err
	}
	return d.report.printLetters(batchID, letters)
}

func (r *report) printApps(batchID int64, rows []App) error {
	if len(rows) == 0 {
		return nil
	}
	r.apps += len(rows)
	fmt.Fprintf(r.w, "Batch %d: %d requests written to %s\n", batchID, len(rows), r.output)
	tw := tabwriter.NewWriter(r.w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "key\tid\tname\tsubject\tproduct\tquantity\tapp_counter")
	for _, a := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\n", a.Key, a.ID, a.Name, a.Subject, a.Product, a.Quantity, a.AppCounter)
	}
	return tw.Flush()
}

func (r *report) printLetters(batchID int64, letters []runtime.DeadLetter) error {
	if len(letters) == 0 {
		return nil
	}
	r.letters += len(letters)
	fmt.Fprintf(r.w, "Batch %d: %d messages sent to %s\n", batchID, len(letters), r.deadLetters)
	tw := tabwriter.NewWriter(r.w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "position\treason")
	for _, l := range letters {
		fmt.Fprintf(tw, "%s\t%s\n", l.Position, l.Error)
	}
	return tw.Flush()
}

// summary prints the run's totals.
func (r *report) summary() error {
	_, err := fmt.Fprintf(r.w, "This run wrote %d requests to %s and %d messages to %s.\n", r.apps, r.output, r.letters, r.deadLetters)
	return err
}
