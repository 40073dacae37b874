// Package benchutil holds what the bench programs share: latency percentiles, process CPU time, heap figures and
// a one-line description of the machine the figures came from.
package benchutil
