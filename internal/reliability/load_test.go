package reliability

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/incident"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// heapSampler reads the daemon's go_memstats_heap_alloc_bytes (runtime.MemStats.HeapAlloc, from its /metrics) every
// interval.
type heapSampler struct {
	mu      sync.Mutex
	samples []heapSample
}

type heapSample struct {
	at    time.Time
	bytes float64
}

func sampleHeap(ctx context.Context, addr string, interval time.Duration) *heapSampler {
	s := &heapSampler{}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if v, ok := scrape(addr, "go_memstats_heap_alloc_bytes"); ok {
				s.mu.Lock()
				s.samples = append(s.samples, heapSample{time.Now(), v})
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// between returns the smallest (the live heap right after a collection) and the largest sample in [from, to].
func (s *heapSampler) between(from, to time.Time) (low, high float64, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.samples {
		if x.at.Before(from) || x.at.After(to) {
			continue
		}
		if n == 0 || x.bytes < low {
			low = x.bytes
		}
		high = max(high, x.bytes)
		n++
	}
	return low, high, n
}

// scrape reads one unlabelled metric from a Prometheus text endpoint.
func scrape(addr, metric string) (float64, bool) {
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && name == metric {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return v, err == nil
		}
	}
	return 0, false
}

func newHelmRelease(namespace, name string) *helmv2.HelmRelease {
	return &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: helmv2.HelmReleaseSpec{Interval: metav1.Duration{Duration: 5 * time.Minute},
			Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "podinfo", Version: "*",
				SourceRef: helmv2.CrossNamespaceObjectReference{Kind: "HelmRepository", Name: "charts"}}}},
	}
}

// retriesExhausted writes the status helm-controller leaves when upgrade retries are exhausted.
//
// hand-written state: see createLoad.
func retriesExhausted(hr *helmv2.HelmRelease) {
	now := metav1.Now()
	hr.Status.ObservedGeneration, hr.Status.UpgradeFailures = hr.Generation, 3
	hr.Status.Conditions = []metav1.Condition{
		{Type: meta.StalledCondition, Status: metav1.ConditionTrue, Reason: flux.RetriesExceededReason,
			Message: "Failed to upgrade after 3 attempt(s)", LastTransitionTime: now, ObservedGeneration: hr.Generation},
		{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: helmv2.UpgradeFailedReason,
			Message: "Helm upgrade failed: retries exhausted", LastTransitionTime: now, ObservedGeneration: hr.Generation},
	}
}

// With 2,000 Argo CD applications and 1,000 HelmReleases in the real apiserver, 5% of them stuck, the daemon finds
// every stuck one, flags nothing healthy and announces each in one Slack thread, and its heap stays flat through a
// burst of updates of every object.
func TestLoadFindsEveryStuckObjectAndKeepsMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: skipped under -short")
	}
	const apps, releases, every = 2000, 1000, 20 // every 20th object is stuck: 5%
	env := testenv.Kube(t)                       // skips under -short, before the build
	bin := buildSyncmedic(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{DisableAuth: true})
	ns := env.Namespace(t)
	ctx := context.Background()

	start := time.Now()
	// hand-written state: see createLoad.
	createLoad(t, argo, ns, apps, releases, every)
	t.Logf("created %d applications and %d HelmReleases in %s", apps, releases, time.Since(start).Round(time.Millisecond))

	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	srv := newFakeSlack(t)
	d := startDaemon(t, bin, "--kubeconfig", env.Kubeconfig, "--kube-checks=false", "--kube-events=false",
		"--flux-namespaces", ns, "--argocd-server", argo.Addr, "--argocd-plaintext", "--operation-stuck-threshold", "1s",
		"--state-file", state, "--log-level", "warn",
		"--slack-token-file", writeFile(t, dir, "slack-token", slackToken), "--slack-channel", "#incidents", "--slack-api-url", srv.GetAPIURL())
	listed := time.Now()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	heap := sampleHeap(sctx, d.addr, 100*time.Millisecond)

	want := sets.New[string]()
	for i := 0; i < apps; i += every {
		want.Insert(fmt.Sprintf("argocd/operation-stuck %s/app-%04d", argo.Namespace, i))
	}
	for i := 0; i < releases; i += every {
		want.Insert(fmt.Sprintf("flux/retries-exhausted %s/release-%04d", ns, i))
	}
	found := func() sets.Set[string] { return incidentKeys(t, state) }
	eventually(t, 3*time.Minute, func() (bool, string) {
		got := found()
		return got.Equal(want), fmt.Sprintf("%d of %d stuck objects found; missing e.g. %v; unexpected %v",
			got.Intersection(want).Len(), want.Len(), firstN(want.Difference(got), 3), firstN(got.Difference(want), 3))
	})
	detected := time.Now()
	t.Logf("all %d stuck objects found %s after the daemon became ready", want.Len(), detected.Sub(listed).Round(time.Millisecond))

	require.Eventually(t, func() bool { _, _, n := heap.between(detected, time.Now()); return n >= 20 }, 30*time.Second, 50*time.Millisecond)
	burst := time.Now()

	// A burst of updates of every object (what the controllers' periodic reconciliations look like).
	for round := range 2 {
		// hand-written state: see updateEverything (every Application's reconciledAt, 2,000 at once).
		updateEverything(t, argo, ns, apps, releases, round)
	}
	eventually(t, time.Minute, func() (bool, string) {
		// Two updates of every application; the watch opened with a resourceVersion, so argocd-server sent no
		// ADDED burst (the List gave the initial state).
		v, ok := scrape(d.addr, `syncmedic_argocd_watch_events_total`)
		return ok && v >= float64(2*apps), fmt.Sprintf("%v Argo CD watch events processed", v)
	})
	settled := time.Now()
	require.Eventually(t, func() bool { _, _, n := heap.between(settled, time.Now()); return n >= 20 }, 30*time.Second, 50*time.Millisecond)
	stop()

	require.True(t, found().Equal(want), "after the burst: still exactly the stuck objects")
	eventually(t, time.Minute, func() (bool, string) { return oneThreadEach(srv, want.Len()) })
	initLow, initHigh, _ := heap.between(listed, burst)
	endLow, endHigh, _ := heap.between(settled, time.Now())
	_, peak, n := heap.between(listed, time.Now())
	t.Logf("daemon heap (HeapAlloc, %d samples): after the initial list %.1f–%.1f MiB; after the burst %.1f–%.1f MiB; peak %.1f MiB; %.1f KiB per object",
		n, initLow/(1<<20), initHigh/(1<<20), endLow/(1<<20), endHigh/(1<<20), peak/(1<<20), endLow/1024/float64(apps+releases))
	require.Positive(t, initLow)
	require.LessOrEqual(t, endLow, 3*initLow, "the heap after the burst stays within 3x the heap after the initial list")
}

func firstN(s sets.Set[string], n int) []string {
	l := sets.List(s)
	if len(l) > n {
		l = l[:n]
	}
	return l
}

// createLoad creates apps Applications and releases HelmReleases (in namespace ns), every every-th one stuck: an
// operation Running with no change, or retries exhausted.
//
// hand-written state: the Applications' operation state and cached trees, and the HelmReleases' Stalled
// RetriesExceeded status, for 2,000 applications and 1,000 releases at once: no controller could sync or fail that
// many on a test machine (a real Argo CD stack costs a minute of 2 cores for a handful). The real controllers'
// versions of these states: internal/conformance/argo TestSyncRunningItsHookIsNotStuck, internal/conformance/flux
// TestRetriesExhaustedIsAnnouncedAndFixResetsTheRealRelease.
func createLoad(t *testing.T, argo *testenv.ArgoCDServer, ns string, apps, releases, every int) {
	t.Helper()
	ctx, env := context.Background(), argo.Env
	require.NoError(t, parallel(apps, 16, func(i int) error {
		app := argo.NewApplication(fmt.Sprintf("app-%04d", i), ns)
		if i%every == 0 {
			app.Operation = &v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: testenv.Revision}}
			app.Status.OperationState = &v1alpha1.OperationState{Operation: *app.Operation, Phase: synccommon.OperationRunning,
				Message: "waiting for healthy state of apps/Deployment/web", StartedAt: metav1.NewTime(time.Now().Truncate(time.Second))}
		}
		// hand-written state: an operation Running in the created Application's status (see createLoad's doc: 2,000 at
		// once).
		return env.Client.Create(ctx, app)
	}))
	for i := 0; i < apps; i += every { // the controller caches a (here empty) resource tree for every app
		// hand-written state: the cached (empty) tree of the stuck apps (see createLoad's doc).
		argo.SetResourceTree(t, fmt.Sprintf("app-%04d", i), &v1alpha1.ApplicationTree{})
	}
	require.NoError(t, parallel(releases, 16, func(i int) error {
		hr := newHelmRelease(ns, fmt.Sprintf("release-%04d", i))
		if err := env.Client.Create(ctx, hr); err != nil {
			return err
		}
		if i%every != 0 {
			return nil
		}
		retriesExhausted(hr)
		// hand-written state: Stalled RetriesExceeded on 1 in every releases (see createLoad's doc: 1,000 at once).
		return env.Client.Status().Update(ctx, hr)
	}))
}

// updateEverything updates every Application and HelmRelease once, as the controllers' periodic reconciliations do.
//
// hand-written state: each Application's status.reconciledAt and summary, for the reason createLoad gives.
func updateEverything(t *testing.T, argo *testenv.ArgoCDServer, ns string, apps, releases, round int) {
	t.Helper()
	ctx, env := context.Background(), argo.Env
	require.NoError(t, parallel(apps, 16, func(i int) error {
		a := &v1alpha1.Application{}
		if err := env.Client.Get(ctx, keyOf(argo.Namespace, fmt.Sprintf("app-%04d", i)), a); err != nil {
			return err
		}
		now := metav1.Now()
		a.Status.ReconciledAt = &now
		a.Status.Summary.Images = []string{fmt.Sprintf("registry.example.com/app:%d", round)}
		// hand-written state: the refresh the controller writes, for every app at once (see updateEverything's doc).
		return env.Client.Update(ctx, a)
	}))
	require.NoError(t, parallel(releases, 16, func(i int) error {
		hr := &helmv2.HelmRelease{}
		if err := env.Client.Get(ctx, keyOf(ns, fmt.Sprintf("release-%04d", i)), hr); err != nil {
			return err
		}
		if hr.Annotations == nil {
			hr.Annotations = map[string]string{}
		}
		hr.Annotations["example.com/round"] = strconv.Itoa(round)
		return env.Client.Update(ctx, hr)
	}))
}

// incidentKeys reads the daemon's state file: "rule namespace/name" of every incident.
func incidentKeys(t *testing.T, state string) sets.Set[string] {
	t.Helper()
	incs, err := (&incident.FileStore{Path: state}).Load(context.Background())
	require.NoError(t, err)
	got := sets.New[string]()
	for _, inc := range incs {
		o := inc.Finding.Object
		got.Insert(string(inc.Finding.Rule) + " " + o.Namespace + "/" + o.Name)
	}
	return got
}

// oneThreadEach reports whether Slack holds n root messages, each with its dry-run reply and nothing else.
func oneThreadEach(srv *fakeSlack, n int) (bool, string) {
	roots := srv.roots("")
	for _, r := range roots {
		if replies := srv.replies(r.TS); len(replies) != 1 {
			var texts []string
			for _, m := range replies {
				texts = append(texts, m.Text)
			}
			return false, fmt.Sprintf("the thread of %q has %d replies, want its dry-run record only: %q", r.Text, len(replies), texts)
		}
	}
	return len(roots) == n, fmt.Sprintf("%d Slack root messages, want one per stuck object (%d)", len(roots), n)
}
