package testenv

import (
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ServerReplica is one more argocd-server of a RealArgoCD stack, the test's own: the same binary, flags, namespace,
// Redis and repo-server as the stack's argocd-server (Argo CD runs several replicas of it the same way), on ports of
// its own, so that the test can restart it without disturbing the other tests sharing the stack.
type ServerReplica struct {
	// Addr is its plaintext gRPC and HTTP address ("127.0.0.1:port"), the same across restarts.
	Addr string
	// Log is its log file, which every start appends to.
	Log string

	s     *RealArgoCD
	env   []string
	ports []int
	mu    sync.Mutex
	proc  *loggedProcess
}

// StartServerReplica starts a ServerReplica and waits until it answers /healthz (Argo CD's readiness probe: its
// informers have synced); it is stopped when the test ends. env adds environment variables of argocd-server's own
// (e.g. ARGOCD_SYNC_WITH_REPLACE_ALLOWED=false, what server.sync.replace.allowed in argocd-cmd-params-cm sets),
// for this replica only.
func (s *RealArgoCD) StartServerReplica(t testing.TB, env ...string) *ServerReplica {
	t.Helper()
	if s.serverArgs == nil {
		t.Fatalf("testenv: the stack was not started by startArgoCDStack")
	}
	r := &ServerReplica{s: s, env: env, Log: filepath.Join(s.Dir, fmt.Sprintf("argocd-server-replica-%s.log", randomHex(4)))}
	c, ports, err := StartOnFreePorts(FreePortsOptions{Name: "argocd-server replica", Ports: 2,
		Start: func(ports []int) (PortChild, error) {
			p, err := r.start(ports)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
		Ready: func(ports []int, c PortChild) error { return r.ready(ports, c.Exited()) },
	})
	if err != nil {
		t.Fatalf("testenv: starting an argocd-server replica: %v", err)
	}
	r.proc, r.ports, r.Addr = c.(*loggedProcess), ports, loopback(ports[0])
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.proc.Stop()
		if t.Failed() {
			t.Logf("testenv: last lines of the argocd-server replica (%s):\n%s", r.Log, tail(r.Log, 40))
		}
	})
	return r
}

func (r *ServerReplica) start(ports []int) (*loggedProcess, error) {
	env := append(append(append([]string(nil), r.s.serverEnv...), "ARGOCD_BINARY_NAME=argocd-server"), r.env...)
	return startLogged(r.s.serverExe, r.s.serverArgs(ports), env, r.s.Dir, r.Log)
}

func (r *ServerReplica) ready(ports []int, exited <-chan struct{}) error {
	return waitHTTP("http://"+loopback(ports[0])+"/healthz", exited, 2*time.Minute)
}

// Restart stops the replica as Kubernetes stops a Pod (SIGTERM, then SIGKILL after 10 s) and starts it again on the
// same ports, as a rollout restart behind a Service does; it returns once the new process answers /healthz. Clients
// connected to the old process see their streams end, and reconnect to the new one on their own schedule: possibly
// before it is ready, as they do through a Service while the old Pod is still an endpoint.
func (r *ServerReplica) Restart(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.proc.Stop()
	var err error
	for attempt := 0; attempt < 50; attempt++ { // the port is ours; only a socket still closing may hold it a moment
		if r.proc, err = r.start(r.ports); err != nil {
			t.Fatalf("testenv: restarting the argocd-server replica: %v", err)
		}
		if err = r.ready(r.ports, r.proc.Exited()); err == nil {
			return
		}
		r.proc.Stop()
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("testenv: the restarted argocd-server replica on port %s is not ready: %v\n%s", strconv.Itoa(r.ports[0]), err, tail(r.Log, 40))
}
