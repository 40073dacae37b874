package benchutil

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"slices"
	"syscall"
	"time"
)

// Percentile returns the p-th percentile (0 < p ≤ 100, nearest rank) of d; d is sorted in place. Zero for none.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	rank := int(float64(len(d))*p/100+0.5) - 1
	return d[min(max(rank, 0), len(d)-1)]
}

// CPUTime returns the user plus system CPU time this process has used so far (getrusage RUSAGE_SELF).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// HeapInUse runs a full GC and returns the bytes held by live heap objects (runtime/metrics
// /memory/classes/heap/objects:bytes).
func HeapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// Machine describes where the figures come from: CPU count, CPU model, Go version, OS and the load average.
func Machine() string {
	m := ThisMachine()
	load := ""
	if l := loadAverage(); l != "" {
		load = ", load average " + l
	}
	return fmt.Sprintf("%d CPUs (%s), %s, GOMAXPROCS %d%s", m.NProc, m.CPUModel, m.Go, m.GOMAXPROCS, load)
}

// Ratio returns a/b, or 0 when b is 0.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
