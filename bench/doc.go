// Package bench holds streamgen's benchmarks, each run side by side with a
// peer or with the raw building block it is built on, so that one
// `go test -bench` run gives the ratios. See README.md for the figures.
package bench
