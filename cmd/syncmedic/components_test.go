package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/kube"
)

// kube's Workflow remedier must be able to hand app-owned Workflows to Argo CD's remedier when serve merges them.
var _ delegator = (*kube.WorkflowRemedier)(nil)

func named(name string, calls *[]string) syncmedic.Remedier {
	return syncmedic.RemedierFunc(func(context.Context, syncmedic.Finding, bool) (syncmedic.Outcome, error) {
		*calls = append(*calls, name)
		return syncmedic.Outcome{}, nil
	})
}

func TestMergeRemedier(t *testing.T) {
	appOwned := syncmedic.Finding{Remedy: syncmedic.Remedy{Action: syncmedic.ActionForceFinalizerRemoval, Params: map[string]string{"app": "ci"}}}
	for _, kubeFirst := range []bool{true, false} {
		name := "kube's remedier delegates app-owned Workflows to Argo CD's when Argo CD registered first"
		if kubeFirst {
			name = "kube's remedier delegates app-owned Workflows to Argo CD's when kube registered first"
		}
		t.Run(name, func(t *testing.T) {
			var calls []string
			argo, wf := named("argocd", &calls), &kube.WorkflowRemedier{}
			var merged syncmedic.Remedier
			var err error
			if kubeFirst {
				merged, err = mergeRemedier(wf, argo)
			} else {
				merged, err = mergeRemedier(argo, wf)
			}
			require.NoError(t, err)
			require.Same(t, wf, merged)
			_, err = merged.Remediate(context.Background(), appOwned, true)
			require.NoError(t, err)
			require.Equal(t, []string{"argocd"}, calls)
		})
	}
	t.Run("the first remedier of an action is taken as it is", func(t *testing.T) {
		var calls []string
		r, err := mergeRemedier(nil, named("only", &calls))
		require.NoError(t, err)
		_, _ = r.Remediate(context.Background(), syncmedic.Finding{}, true)
		require.Equal(t, []string{"only"}, calls)
	})
	t.Run("two remediers that both insist on an action are a wiring error", func(t *testing.T) {
		var calls []string
		_, err := mergeRemedier(named("a", &calls), named("b", &calls))
		require.ErrorContains(t, err, "neither delegates")
	})
}
