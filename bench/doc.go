// Package bench holds syncmedic's load benchmarks (receiverload, watchscale): programs that measure syncmedic
// against a baseline in the same run and print the figures and a final ratio line. See README.md.
package bench
