// Command check is `make bench-check`: it reruns the ratio benchmarks and fails when one is past its floor.
//
// It runs, one after the other on this machine, receiverload (the Flux receiver's throughput against a bare
// net/http handler), watchscale -apps 10000 (the Argo CD watcher's CPU per application state against decoding
// alone, and the heap it keeps per application) and BenchmarkRead50k of snapshot/ (the peak live heap of reading
// and scanning a 50,000-object dump). Each figure is read from the tool's own result file (or the benchmark's own
// metric line), compared with its floor (benchcheck.Floors: issue 47 item 8), and written with its verdict to
// bench/results/check-<date>-<commit>.json; the section of bench/README.md between the bench-check markers is
// rewritten from that file (benchcheck.Section). The process exits 1 when a figure is past its floor, 2 when a tool failed.
//
// It is not part of `make test`: the ratios compare two consumers in the same run, which cancels most of a busy
// machine's noise, but not all of it. Run it on a quiet machine after a change to the receiver, the watcher, the
// tracker, the snapshot reader or the rules they call.
package main
