package benchutil

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
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
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = ", load average " + strings.Join(f[:3], " ")
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s %s/%s, GOMAXPROCS %d%s", runtime.NumCPU(), model, runtime.Version(),
		runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), load)
}

// Ratio returns a/b, or 0 when b is 0.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
