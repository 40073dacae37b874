package flux

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

func helmReleaseCRD(served ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: CRDName}}
	for i, v := range served {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: i == 0})
	}
	return crd
}

func TestWatcherReadinessFollowsTheServedVersions(t *testing.T) {
	tests := []struct {
		name     string
		watching string
		crd      any
		deleted  bool
		notReady string
	}{
		{name: "a Flux 2.2 CRD serving the watched v2beta2 keeps the watcher ready", watching: "v2beta2", crd: helmReleaseCRD("v2beta2", "v2beta1")},
		{name: "an upgrade that adds v2 keeps the v2beta2 watch ready (the objects are the same)", watching: "v2beta2", crd: helmReleaseCRD("v2", "v2beta2", "v2beta1")},
		{name: "an upgrade that stops serving the watched v2beta1 makes the watcher not ready", watching: "v2beta1", crd: helmReleaseCRD("v2", "v2beta2"),
			notReady: "no longer serves helm.toolkit.fluxcd.io/v2beta1 HelmReleases"},
		{name: "a version listed but no longer served counts as gone", watching: "v2beta1", crd: func() any {
			crd := helmReleaseCRD("v2", "v2beta2", "v2beta1")
			crd.Spec.Versions[2].Served = false
			return crd
		}(), notReady: "no longer serves helm.toolkit.fluxcd.io/v2beta1"},
		{name: "a deleted CRD makes the watcher say Flux is gone", watching: "v2", crd: helmReleaseCRD("v2"), deleted: true,
			notReady: "serves no HelmRelease API"},
		{name: "a deletion seen late (final state unknown) says the same", watching: "v2", deleted: true,
			crd: toolscache.DeletedFinalStateUnknown{Key: CRDName, Obj: helmReleaseCRD("v2")}, notReady: "serves no HelmRelease API"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[watchKey]{})
			defer q.ShutDown()
			w := &Watcher{apiVersion: tt.watching, log: slog.New(slog.DiscardHandler), queue: q}
			w.synced.Store(true)
			w.crdChanged(tt.crd, tt.deleted)
			require.Equal(t, 1, q.Len(), "the CRD is evaluated too")
			if tt.notReady == "" {
				require.NoError(t, w.Ready())
				return
			}
			require.ErrorContains(t, w.Ready(), tt.notReady)
			// Serving it again (a rollback) makes it ready again.
			w.crdChanged(helmReleaseCRD(tt.watching), false)
			require.NoError(t, w.Ready())
		})
	}
}
