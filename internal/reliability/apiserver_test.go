package reliability

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/kube"
	"github.com/syncmedic/syncmedic/policy"
)

// throughProxy returns a copy of cfg that reaches the apiserver through a tcpProxy (the apiserver's certificate
// names 127.0.0.1, which the proxy also listens on).
func throughProxy(t *testing.T, cfg *rest.Config) (*rest.Config, *testenv.Proxy) {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	p := testenv.NewProxy(t, u.Host)
	c := rest.CopyConfig(cfg)
	c.Host = u.Scheme + "://" + p.Addr()
	return c, p
}

// incidentsAbout returns the incidents whose finding's object is namespace/name (any kind).
func incidentsAbout(tr *incident.Tracker, rule syncmedic.RuleID, namespace, name string) []incident.Incident {
	var out []incident.Incident
	for _, inc := range tr.Incidents() {
		o := inc.Finding.Object
		if inc.Finding.Rule == rule && o.Namespace == namespace && o.Name == name {
			out = append(out, inc)
		}
	}
	return out
}

// The apiserver unreachable for syncmedic's clients for a while (every connection cut, new ones refused): the
// kube scanner and the Flux watcher resume by themselves; what became stuck during the outage is found, what was
// fixed during it resolves, and what was stuck before stays one open incident, never resolved meanwhile.
func TestApiserverOutageLosesNoFinding(t *testing.T) {
	env := testenv.Kube(t)
	cfg, proxy := throughProxy(t, env.Config)
	nsA, nsB := env.Namespace(t), env.Namespace(t)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	pol, err := policy.LoadPolicy([]byte("resolveAfter: 1\n"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	tr, err := incident.NewTracker(ctx, incident.TrackerOptions{Policy: func() *policy.Policy { return pol }, Log: log})
	require.NoError(t, err)
	scanner, err := kube.NewScanner(kube.ScannerOptions{Config: cfg, Cluster: "outage", Kinds: []string{"jobs.batch"},
		Thresholds: kube.Thresholds{Terminating: time.Second, WebhookBackend: time.Second, ArtifactGC: time.Second}, Log: log})
	require.NoError(t, err)
	// The scenarios date the old controller's status a minute after creation; the Flux clock runs that much ahead.
	fluxNow := func() time.Time { return time.Now().Add(time.Minute) }
	fw, err := flux.NewWatcher(flux.WatcherOptions{Config: cfg, Namespaces: []string{nsA, nsB}, Now: fluxNow,
		Thresholds: flux.Thresholds{StaleStatus: time.Second, DependencyNotReady: time.Second}, Log: log})
	require.NoError(t, err)
	done := make(chan error, 2)
	for _, src := range []syncmedic.Source{scanner, fw} {
		go func() { done <- src.Run(ctx, tr) }()
	}
	t.Cleanup(func() {
		cancel()
		for range 2 {
			require.NoError(t, <-done)
		}
	})
	require.Eventually(t, func() bool { return scanner.Ready() == nil && fw.Ready() == nil }, 30*time.Second, 50*time.Millisecond)

	stuckJob := func(ns, name string) *batchv1.Job {
		return testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: name})
	}
	before := stuckJob(nsA, "before")
	fixed := stuckJob(nsA, "fixed-during-outage")
	// hand-written state: see testenv.ScenarioHelmReleaseOldStatus (a v2beta1-era status no downloadable
	// helm-controller writes). This test is about the apiserver going away under the watcher, not the controller.
	testenv.ScenarioHelmReleaseOldStatus(t, env, nsA, "before", "v2beta1")
	eventually(t, 30*time.Second, func() (bool, string) {
		for _, w := range []struct {
			rule     syncmedic.RuleID
			ns, name string
		}{{syncmedic.RuleStuckTerminating, nsA, "before"}, {syncmedic.RuleStuckTerminating, nsA, fixed.Name}, {syncmedic.RuleHelmReleaseStaleStatus, nsA, "before"}} {
			if len(incidentsAbout(tr, w.rule, w.ns, w.name)) != 1 {
				return false, fmt.Sprintf("no %s incident for %s/%s", w.rule, w.ns, w.name)
			}
		}
		return true, ""
	})

	proxy.Down()
	stuckJob(nsB, "during")
	// hand-written state: see testenv.ScenarioHelmReleaseOldStatus, written while syncmedic cannot reach the
	// apiserver.
	testenv.ScenarioHelmReleaseOldStatus(t, env, nsB, "during", "v2beta2")
	require.NoError(t, env.Client.Patch(context.Background(), fixed,
		client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`))))
	require.Eventually(t, func() bool { return proxy.Refused() >= 5 }, 30*time.Second, 20*time.Millisecond,
		"syncmedic's clients keep trying to reach the apiserver")
	proxy.Up()

	want := []struct {
		rule     syncmedic.RuleID
		ns, name string
		open     bool
	}{
		{syncmedic.RuleStuckTerminating, nsA, before.Name, true},
		{syncmedic.RuleHelmReleaseStaleStatus, nsA, "before", true},
		{syncmedic.RuleStuckTerminating, nsB, "during", true},
		{syncmedic.RuleHelmReleaseStaleStatus, nsB, "during", true},
		{syncmedic.RuleStuckTerminating, nsA, fixed.Name, false},
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		for _, w := range want {
			incs := incidentsAbout(tr, w.rule, w.ns, w.name)
			if len(incs) != 1 || incs[0].IsOpen() != w.open {
				var got []string
				for _, inc := range incs {
					got = append(got, string(inc.State))
				}
				return false, fmt.Sprintf("%s %s/%s: want one incident, open=%v; got %s", w.rule, w.ns, w.name, w.open, strings.Join(got, ","))
			}
		}
		return true, ""
	})
}
