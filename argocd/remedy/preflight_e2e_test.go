package remedy_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/remedy"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/policy"
)

// TestPermissionPreflight asks the real argocd-server's AccountService.CanI what the accounts may do: argocd-server
// silently leaves the applications an account may not get out of Watch and List, so without the preflight an
// account without `applications, get` would watch an empty list and report nothing stuck.
func TestPermissionPreflight(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"blind", "viewer"},
		Policy: []string{
			"p, role:viewer, applications, get, */*, allow", "g, viewer, role:viewer",
			"p, role:blind, projects, get, *, allow", "g, blind, role:blind",
		},
	})
	app := argo.CreateApplication(t, argo.NewApplication("visible", env.Namespace(t)))
	blind, viewer := argo.Token(t, "blind"), argo.Token(t, "viewer")

	t.Run("a watcher whose account may not get applications is not ready and names the policy line to add", func(t *testing.T) {
		w, rec, done := startWatcher(t, dial(t, argo.Addr, blind), thresholds)
		var err error
		require.Eventually(t, func() bool { err = w.Ready(); return argocd.IsAccessDenied(err) }, 30*time.Second, 20*time.Millisecond,
			"last Ready: %v", err)
		require.ErrorContains(t, err, "`applications, get, */*`")
		require.ErrorContains(t, err, "`p, role:syncmedic, applications, get, */*, allow`")
		require.Zero(t, rec.count(argocd.Subject("", argo.Namespace, app.Name)), "argocd-server hid the application from it")
		select {
		case err := <-done:
			t.Fatalf("the watcher stopped (%v): it must keep watching and re-ask until the permission is granted", err)
		default:
		}
	})

	t.Run("a watcher whose account may get applications is ready and sees them", func(t *testing.T) {
		w, rec, _ := startWatcher(t, dial(t, argo.Addr, viewer), thresholds)
		require.Eventually(t, func() bool { return w.Ready() == nil }, 30*time.Second, 20*time.Millisecond)
		require.Eventually(t, func() bool { return rec.count(argocd.Subject("", argo.Namespace, app.Name)) > 0 }, 10*time.Second, 20*time.Millisecond)
	})

	t.Run("a watcher limited to a project it may not get names that project", func(t *testing.T) {
		c := dial(t, argo.Addr, blind)
		err := argocd.CheckWatch(context.Background(), c, argocd.WatchScope([]string{"default"}, ""))
		require.True(t, syncmedic.IsPermanent(err))
		require.ErrorContains(t, err, "`p, role:syncmedic, applications, get, default/*, allow`")
	})

	t.Run("a one-shot scan with an account that may not get applications is refused, not reported as nothing stuck", func(t *testing.T) {
		fs, _, err := argocd.Scan(context.Background(), argocd.ScanOptions{Client: dial(t, argo.Addr, blind), Thresholds: thresholds}, time.Now())
		require.Error(t, err)
		require.True(t, syncmedic.IsPermanent(err))
		require.True(t, argocd.IsAccessDenied(err))
		require.Empty(t, fs)
	})

	t.Run("the remedies preflight names what an account lacks for the policy's automatic remedies", func(t *testing.T) {
		pol := policy.DefaultPolicy()
		pol.Rules = map[syncmedic.RuleID]policy.RulePolicy{
			syncmedic.RuleHookFinalizerStuck: {Mode: policy.ModeAuto},
			syncmedic.RuleOperationStuck:     {Mode: policy.ModeAuto, Projects: []string{"default"}},
		}
		logs := &syncBuffer{}
		log := slog.New(slog.NewTextHandler(logs, nil))
		res := remedy.WarnRemedies(context.Background(), dial(t, argo.Addr, viewer), nil, pol, argocd.WatchScope(nil, ""), log)
		require.Contains(t, res.Missing, argocd.Permission{Action: argocd.ActionSync, Object: "*/*"})
		require.Contains(t, res.Missing, argocd.Permission{Action: argocd.ActionUpdate, Object: "*/*"})
		require.Contains(t, res.Missing, argocd.Permission{Action: argocd.ActionSync, Object: "default/*"})
		require.Contains(t, logs.String(), "level=WARN")
		require.Contains(t, logs.String(), "p, role:syncmedic, applications, sync, default/*, allow")
		t.Logf("warning: %s", res.Warning())

		admin := remedy.WarnRemedies(context.Background(), dial(t, argo.Addr, argo.AdminToken(t)), nil, pol, argocd.WatchScope(nil, ""), log)
		require.Empty(t, admin.Missing, "role:admin may sync and update every application")
	})
}

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
