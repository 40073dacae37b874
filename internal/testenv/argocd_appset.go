package testenv

import (
	"fmt"
	"testing"
	"time"
)

// StartApplicationSetController starts argocd-applicationset-controller of the stack's version, from the same
// multi-call binary, with --enable-progressive-syncs (RollingSync keeps status.applicationStatus only then) and its
// ApplicationSets in the stack's control-plane namespace; once per stack, later calls return at once. It skips under
// -short like the stack.
func (s *RealArgoCD) StartApplicationSetController(t testing.TB) {
	t.Helper()
	skipShort(t)
	s.appSets.Do(func() { s.appSetsErr = s.startAppSetController() })
	if s.appSetsErr != nil {
		t.Fatalf("testenv: starting argocd-applicationset-controller %s: %v", s.Version, s.appSetsErr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			const c = "argocd-applicationset-controller"
			t.Logf("testenv: last lines of Argo CD %s %s (%s):\n%s", s.Version, c, s.Logs[c], tail(s.Logs[c], 30))
		}
	})
}

// startAppSetController runs the controller on three free loopback ports (metrics, probes, webhook) and waits for
// its metrics endpoint.
func (s *RealArgoCD) startAppSetController() error {
	if s.exe == "" {
		return fmt.Errorf("the stack was not started by startArgoCDStack")
	}
	_, err := s.startComponentOn(3, s.exe, s.envv, "argocd-applicationset-controller", func(ports []int) []string {
		return []string{"--namespace", s.Namespace, "--enable-progressive-syncs",
			"--argocd-repo-server", s.repoServer, "--repo-server-plaintext",
			"--metrics-addr", loopback(ports[0]), "--probe-addr", loopback(ports[1]), "--webhook-addr", loopback(ports[2]),
			"--logformat", "text", "--loglevel", "debug"}
	}, func(ports []int, exited <-chan struct{}) error {
		return waitHTTP("http://"+loopback(ports[0])+"/metrics", exited, 2*time.Minute) // no probes are registered: the metrics server answers once the manager runs
	})
	return err
}
