package benchcheck

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/bench/internal/benchutil"
)

func TestJudgeFailsEachFigurePastItsFloorAndOneNotMeasured(t *testing.T) {
	good := map[string]float64{ReceiverRatio: 0.88, WatchRatio: 1.4, ScanPeak: 160, HeapPerApp: 5013}
	res := &benchutil.Result{}
	require.Zero(t, Judge(res, good))
	require.Equal(t, []benchutil.Figure{
		{Name: ReceiverRatio, Value: "0.88 (≥ 0.85: met)"},
		{Name: WatchRatio, Value: "1.40 (≤ 1.6: met)"},
		{Name: ScanPeak, Value: "160 (≤ 200 MB: met)"},
		{Name: HeapPerApp, Value: "5013 (≤ 5 KiB (5120 B): met)"},
	}, res.Figures)

	for name, past := range map[string]float64{ReceiverRatio: 0.84, WatchRatio: 1.61, ScanPeak: 200.5, HeapPerApp: 5121} {
		m := map[string]float64{}
		for k, v := range good {
			m[k] = v
		}
		m[name] = past
		res := &benchutil.Result{}
		require.Equal(t, 1, Judge(res, m), name)
		for _, f := range res.Figures {
			require.Equal(t, f.Name == name, strings.HasSuffix(f.Value, ": PAST THE FLOOR)"), "%s: %s", f.Name, f.Value)
		}
	}
	delete(good, ScanPeak)
	res = &benchutil.Result{}
	require.Equal(t, 1, Judge(res, good))
	require.Equal(t, "0 (≤ 200 MB: NOT MEASURED)", res.Figures[2].Value)
}

func TestParseBenchMetricReadsTheBenchmarksOwnLine(t *testing.T) {
	out := "goos: linux\nBenchmarkRead50k-2   \t       1\t1031562079 ns/op\t       158.2 peak-MB\t       110.0 kept-MB\t     40000 kept-objects\t186023464 B/op\t 1882736 allocs/op\nPASS\n"
	v, err := ParseBenchMetric(out, "BenchmarkRead50k", "peak-MB")
	require.NoError(t, err)
	require.Equal(t, 158.2, v)
	_, err = ParseBenchMetric(out, "BenchmarkRead50k", "nope-MB")
	require.ErrorContains(t, err, "no nope-MB")
	_, err = ParseBenchMetric("PASS\n", "BenchmarkRead50k", "peak-MB")
	require.ErrorContains(t, err, "no result line")
	_, err = ParseBenchMetric(out, "BenchmarkRead5", "peak-MB")
	require.Error(t, err, "a benchmark whose name only begins the same is not it")
}

func TestReplaceSectionKeepsTheRestAndNeedsBothMarkers(t *testing.T) {
	doc := "# Benchmarks\n\n" + beginMarker + "\nold\n" + endMarker + "\n\n## after\n"
	out, err := ReplaceSection(doc, beginMarker+"\nnew\n"+endMarker)
	require.NoError(t, err)
	require.Equal(t, "# Benchmarks\n\n"+beginMarker+"\nnew\n"+endMarker+"\n\n## after\n", out)
	_, err = ReplaceSection("# Benchmarks\n", "x")
	require.ErrorContains(t, err, "no bench-check section")
}
