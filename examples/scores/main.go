// Command scores is Spark 4's asynchronous gather processor: for each user with
// new visits, a transformWithState processor calls a scoring service once
// per visit, all of the user's calls at once, keeps the user's highest
// score in a value state and emits it (Update mode). The program starts
// the scoring service itself, on 127.0.0.1, answering each call after
// -latency. At the end it prints how long the query took: compare
// -concurrency 1 (one user's calls at a time) with -concurrency 32.
//
//	go run ./examples/scores -concurrency 1 -output /tmp/scores-1
//	go run ./examples/scores -concurrency 32 -output /tmp/scores-32
//
// Input rows: {"event_id": N, "user": "u001", "page": "/cart", "seconds": N}.
//
// Flags: -input DIR, -output DIR, -checkpoint DIR, -max-files-per-trigger
// N (default 10), -trigger availableNow|once|DURATION, -dead-letter DIR,
// -concurrency N (handlers of different users at once), -latency DURATION
// (the scoring service's, default 5ms), -metrics ADDR (Prometheus metrics
// at http://ADDR/metrics while the query runs).
//
// SIGINT or SIGTERM stops the query between batches. The exit status is 0
// when the input is done, 130 after SIGINT, 143 after SIGTERM, 1 on an
// error (-h lists it all).
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/typed"
)

func main() {
	cli.Exit("scores", run(os.Args[1:], os.Stdout, nil))
}

// run runs the program; wrapService, if not nil, wraps the scoring
// service's handler (tests hold calls with it).
func run(args []string, stdout io.Writer, wrapService func(http.Handler) http.Handler) error {
	var (
		latency     time.Duration
		concurrency int
		service     *scoringService
		started     time.Time
	)
	defer func() {
		if service != nil {
			service.Close()
		}
	}()
	return cli.RunExample(cli.Example[Visit, UserScore]{
		Name:               "scores",
		Sample:             writeSample,
		MaxFilesPerTrigger: 10,
		Concurrency:        true,
		Flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&latency, "latency", 5*time.Millisecond, "how long the scoring service takes to answer a call")
		},
		Pipeline: func(in typed.Stream[Visit], f *cli.Flags) (typed.Stream[UserScore], error) {
			var err error
			if service, err = startScoringService(latency, wrapService); err != nil {
				return typed.Stream[UserScore]{}, err
			}
			concurrency, started = f.Concurrency, time.Now()
			return bestScores(in, service.url, concurrency), nil
		},
		Finish: func(stdout io.Writer) error {
			_, err := fmt.Fprintf(stdout, "%d calls to the scoring service in %v (-concurrency %d, -latency %v), at most %d at once.\n",
				service.calls.Load(), time.Since(started).Round(time.Millisecond), concurrency, latency, service.maxInFlight.Load())
			return err
		},
	}, args, stdout)
}
