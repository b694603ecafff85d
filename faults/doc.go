// Package faults holds the fault campaign: tests, and nothing else, that
// run the example programs and a count-per-key program as an operations
// team would, as built binaries in processes, and break what is around
// them. They kill the programs with SIGKILL at random points and restart
// them; they damage each file of a finished checkpoint in turn; they put
// bad input beside good files. Each time the program must write what an
// undisturbed run writes (and the bad input to its dead letters), or
// refuse to start with an error that names the checkpoint; never lose or
// double a row, never panic.
//
// go test ./faults runs the short campaign (one kill per program);
// STREAMGEN_TEST_FULL=1, which CI sets, the full one (three);
// STREAMGEN_FAULTS_LONG=1 the long one (200), which the README's
// "Reliability" section reports on. STREAMGEN_FAULTS_SEED=N repeats the
// random choices of an earlier run (the timing of the processes, which
// the kills depend on, is the machine's). The defects the campaign found
// are tests of their own, skipped until they are fixed.
//
// Storage faults inside a running process (a full disk, a failing sync, a
// disk that hangs) are tested in package runtime (faults_test.go) and
// package typed (faults_test.go), and SIGINT and SIGTERM in
// examples/signals_test.go; this package does not repeat them.
package faults
