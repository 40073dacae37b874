package remedy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

func TestSyncRequest(t *testing.T) {
	tgt := argocd.AppRef{Name: "shop", Namespace: "argocd", Project: "default"}
	t.Run("the stuck operation's revision, prune and options are repeated", func(t *testing.T) {
		op := runningOp(time.Hour, "", "")
		op.Operation.Sync.Prune = true
		req := syncRequest(tgt, app(op), nil)
		require.Equal(t, "4f2c1e9", req.GetRevision())
		require.True(t, req.GetPrune())
		require.Equal(t, []string{"CreateNamespace=true"}, req.SyncOptions.Items)
		require.Equal(t, "argocd", req.GetAppNamespace())
	})
	t.Run("an auto-synced application is synced to its target revision", func(t *testing.T) {
		a := app(runningOp(time.Hour, "", ""))
		a.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{}}
		require.Nil(t, syncRequest(tgt, a, nil).Revision)
	})
	t.Run("without an operation state the finding's parameters are used", func(t *testing.T) {
		req := syncRequest(tgt, app(nil), map[string]string{rules.ParamRevision: "abc", rules.ParamSyncOptions: "A=1,B=2", rules.ParamPrune: "true"})
		require.Equal(t, "abc", req.GetRevision())
		require.Equal(t, []string{"A=1", "B=2"}, req.SyncOptions.Items)
		require.True(t, req.GetPrune())
	})
}

func TestSuperseded(t *testing.T) {
	op := runningOp(time.Hour, "", "")
	started := op.StartedAt.UTC().Format(time.RFC3339)
	tests := []struct {
		name string
		app  func() *v1alpha1.Application
		want bool
	}{
		{"the stuck operation itself is not superseded", func() *v1alpha1.Application { return app(op) }, false},
		{"a requested sync not yet started supersedes it", func() *v1alpha1.Application {
			a := app(nil)
			a.Operation = &v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{}}
			return a
		}, true},
		{"a later operation supersedes it", func() *v1alpha1.Application {
			later := op.DeepCopy()
			later.StartedAt = metav1.NewTime(now)
			return app(later)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { require.Equal(t, tt.want, superseded(tt.app(), started)) })
	}
}
