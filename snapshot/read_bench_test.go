package snapshot

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/synthdump"
)

// dumpMix says which objects a generated dump holds: used of every 5 objects are of kinds a rule reads (a hook Job,
// a Service, a HelmRelease, an Application), the others of kinds no rule reads unless they are terminating.
type dumpMix struct {
	objects int
	used    int // of every 5 objects, 0 to 4
}

// writeDump writes a `kubectl get -A -o yaml`-shaped List of mix.objects objects and returns its path.
func writeDump(b *testing.B, mix dumpMix) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "dump.yaml")
	f, err := os.Create(path)
	require.NoError(b, err)
	w := bufio.NewWriter(f)
	synthdump.Write(w, mix.objects, mix.used)
	require.NoError(b, w.Flush())
	require.NoError(b, f.Close())
	return path
}

// peakHeap samples the heap's live objects every millisecond until stop is called, which returns the largest sample.
func peakHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak {
				peak = v
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// benchmarkRead reads and scans a generated dump, and reports the peak heap during the read and scan (peak-MB),
// the heap still live while the snapshot and its observations are held (kept-MB), and the objects kept.
func benchmarkRead(b *testing.B, mix dumpMix) {
	path := writeDump(b, mix)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var peak, kept uint64
	var keptObjects int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		stop := peakHeap()
		b.StartTimer()
		s, err := ReadPaths(path)
		if err != nil || s.Len() != mix.objects {
			b.Fatalf("read %d objects of %d: %v", s.Len(), mix.objects, err)
		}
		o := s.Observe()
		_ = Scan(o, now, DefaultThresholds())
		b.StopTimer()
		if p := stop(); p > peak {
			peak = p
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if after.HeapAlloc > before.HeapAlloc && after.HeapAlloc-before.HeapAlloc > kept {
			kept = after.HeapAlloc - before.HeapAlloc
		}
		keptObjects = len(s.Objects)
		runtime.KeepAlive(o)
		runtime.KeepAlive(s)
		b.StartTimer()
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
	b.ReportMetric(float64(kept)/(1<<20), "kept-MB")
	b.ReportMetric(float64(keptObjects), "kept-objects")
}

// BenchmarkRead50k reads and scans a 50,000-object dump: 4 in 5 objects of kinds a rule reads.
func BenchmarkRead50k(b *testing.B) { benchmarkRead(b, dumpMix{objects: 50_000, used: 4}) }

// BenchmarkRead200k reads and scans a 200,000-object dump (a big cluster's `kubectl get -A`) of the same mix.
func BenchmarkRead200k(b *testing.B) { benchmarkRead(b, dumpMix{objects: 200_000, used: 4}) }

// BenchmarkRead200kFewUsed reads and scans a 200,000-object dump in which 1 in 5 objects is of a kind a rule reads
// (a hook Job): as many kept objects as a 50,000-object dump of the first mix would keep Jobs, in a dump 4 times
// larger.
func BenchmarkRead200kFewUsed(b *testing.B) { benchmarkRead(b, dumpMix{objects: 200_000, used: 1}) }
