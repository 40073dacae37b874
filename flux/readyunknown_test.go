package flux

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// hand-written state: installingRelease builds in memory the status helm-controller v1.4.3 writes before it runs an
// install (atomic_release.go: Ready Unknown, Reconciling True, "Running 'install' action with timeout of …") for the
// pure rule tests; internal/conformance/flux leaves the real controller in it by stopping it mid-install.

// installingRelease is HelmRelease apps/web whose install started ago with the given timeout.
func installingRelease(ago, timeout time.Duration) *helmv2.HelmRelease {
	msg := "Running 'install' action with timeout of " + timeout.String()
	hr := release("web", 1, 1,
		cond(meta.ReadyCondition, "Unknown", meta.ProgressingReason, msg, ago),
		cond(meta.ReconcilingCondition, "True", meta.ProgressingReason, msg, ago))
	hr.Spec.Timeout = &metav1.Duration{Duration: timeout}
	return hr
}

// storageSecret is Helm's release Secret of web revision 1 with status, encoded as the apiserver returns it:
// base64 (the Secret) of base64 (Helm) of gzipped JSON.
func storageSecret(t *testing.T, status, description string) *unstructured.Unstructured {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(`{"name":"web","version":1,"namespace":"apps","info":{"status":"` + status + `","description":"` + description +
		`","last_deployed":"2026-03-10T11:00:00Z"},"chart":{"metadata":{"name":"web","version":"1.0.0"}}}`))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	helmEncoded := base64.StdEncoding.EncodeToString(buf.Bytes())
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": HelmStorageSecretType,
		"metadata": map[string]any{"name": "sh.helm.release.v1.web.v1", "namespace": "apps",
			"labels": map[string]any{"owner": "helm", "name": "web", "status": "pending-install", "version": "1"}},
		"data": map[string]any{"release": base64.StdEncoding.EncodeToString([]byte(helmEncoded))},
	}}
	return u
}

func TestHelmStorageOfDecodesTheReleaseRecord(t *testing.T) {
	s, err := HelmStorageOf(storageSecret(t, "deployed", "Install complete"))
	require.NoError(t, err)
	require.Equal(t, HelmStorage{Secret: "apps/sh.helm.release.v1.web.v1", Release: "web", Revision: 1, Status: "deployed",
		Description: "Install complete", Chart: "web@1.0.0", LastDeployed: time.Date(2026, 3, 10, 11, 0, 0, 0, time.UTC)}, s)
	require.Equal(t, "apps/sh.helm.release.v1.web.v1: deployed (Install complete), chart web@1.0.0, last deployed 2026-03-10T11:00:00Z", s.String())

	t.Run("a record that does not decode keeps what the labels say", func(t *testing.T) {
		u := storageSecret(t, "deployed", "")
		require.NoError(t, unstructured.SetNestedField(u.Object, "bm90IGd6aXA=", "data", "release"))
		s, err := HelmStorageOf(u)
		require.Error(t, err)
		require.Equal(t, "pending-install", s.Status)
		require.Equal(t, 1, s.Revision)
	})
	t.Run("a Secret of another type is refused", func(t *testing.T) {
		u := storageSecret(t, "deployed", "")
		u.Object["type"] = "Opaque"
		_, err := HelmStorageOf(u)
		require.ErrorContains(t, err, "not helm.sh/release.v1")
	})
}

func TestReadyUnknownStuck(t *testing.T) {
	th := DefaultThresholds()
	deployed := func(t *testing.T) *HelmStorage {
		s, err := HelmStorageOf(storageSecret(t, "deployed", "Install complete"))
		require.NoError(t, err)
		return &s
	}
	tests := []struct {
		name  string
		obs   func(t *testing.T) ReleaseObservation
		want  []syncmedic.RuleID
		check func(t *testing.T, fs []syncmedic.Finding)
	}{
		{
			name: "an install in progress past its timeout plus the threshold, while Helm's storage says deployed",
			obs: func(t *testing.T) ReleaseObservation {
				return ReleaseObservation{Release: installingRelease(time.Hour, 5*time.Minute), Storage: deployed(t), StorageKnown: true}
			},
			want: []syncmedic.RuleID{syncmedic.RuleReadyUnknownStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Equal(t, `HelmRelease apps/web has been in progress for 1h, past its 5m timeout: "Running 'install' action with timeout of 5m0s"; Helm's storage says revision 1 is deployed`, f.Summary)
				require.Equal(t, now.Add(-time.Hour), f.Since)
				require.Contains(t, f.Evidence, syncmedic.Evidence{Field: "Helm storage", Value: "apps/sh.helm.release.v1.web.v1: deployed (Install complete), chart web@1.0.0, last deployed 2026-03-10T11:00:00Z"})
				require.Contains(t, f.Evidence, syncmedic.Evidence{Field: "action timeout", Value: "5m0s"})
				require.Equal(t, syncmedic.ActionFluxReconcile, f.Remedy.Action)
				require.True(t, f.Remedy.AutoSafe)
				require.Equal(t, "false", f.Remedy.Params[ParamEscalate], "a plain request only, never forced")
				require.Equal(t, []string{"flux reconcile helmrelease web -n apps", "kubectl -n apps get secrets -l owner=helm,name=web",
					"helm -n apps history web", "kubectl -n flux-system logs deploy/helm-controller"}, f.Remedy.Commands)
			},
		},
		{
			name: "reconciliation in progress with the storage not read says so and times out on spec.timeout",
			obs: func(t *testing.T) ReleaseObservation {
				hr := installingRelease(20*time.Minute, 2*time.Minute)
				hr.Status.Conditions[0].Message = "reconciliation in progress"
				return ReleaseObservation{Release: hr, StorageProblem: "serve reads no Secrets unless --flux-read-helm-storage is set"}
			},
			want: []syncmedic.RuleID{syncmedic.RuleReadyUnknownStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, `HelmRelease apps/web has been in progress for 20m, past its 2m timeout: "reconciliation in progress"`, fs[0].Summary)
				require.Contains(t, fs[0].Evidence, syncmedic.Evidence{Field: "Helm storage", Value: "not read: serve reads no Secrets unless --flux-read-helm-storage is set"})
			},
		},
		{
			name: "near miss: a long install still within its timeout plus the threshold",
			obs: func(t *testing.T) ReleaseObservation {
				return ReleaseObservation{Release: installingRelease(9*time.Minute, 5*time.Minute)}
			},
		},
		{
			name: "near miss: an install with a long timeout is judged on its own timeout",
			obs: func(t *testing.T) ReleaseObservation {
				return ReleaseObservation{Release: installingRelease(time.Hour, 2*time.Hour)}
			},
		},
		{
			name: "near miss: a suspended release",
			obs: func(t *testing.T) ReleaseObservation {
				hr := installingRelease(time.Hour, 5*time.Minute)
				hr.Spec.Suspend = true
				return ReleaseObservation{Release: hr}
			},
		},
		{
			name: "near miss: a release that finished (Ready True)",
			obs: func(t *testing.T) ReleaseObservation {
				return ReleaseObservation{Release: withHistory(release("web", 1, 1, cond(meta.ReadyCondition, "True", helmv2.InstallSucceededReason, "Helm install succeeded for release apps/web.v1 with chart web@1.0.0", time.Hour)))}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := EvaluateRelease(tt.obs(t), now, th)
			var got []syncmedic.RuleID
			for _, f := range fs {
				got = append(got, f.Rule)
			}
			require.Equal(t, tt.want, got)
			if tt.check != nil {
				tt.check(t, fs)
			}
		})
	}
}

func TestNextThresholdWakesAReleaseInProgress(t *testing.T) {
	th := DefaultThresholds()
	hr := installingRelease(time.Minute, 5*time.Minute)
	at, ok := nextThreshold(hr, nil, now, th)
	require.True(t, ok)
	require.Equal(t, now.Add(-time.Minute+5*time.Minute+th.ReadyUnknown), at)
}

func TestLatestStorageIsTheNewestRevisionOfTheRelease(t *testing.T) {
	hr := installingRelease(time.Hour, 5*time.Minute)
	found := []HelmStorage{
		{Secret: "apps/sh.helm.release.v1.web.v1", Release: "web", Revision: 1, Status: "superseded"},
		{Secret: "apps/sh.helm.release.v1.web.v2", Release: "web", Revision: 2, Status: "pending-upgrade"},
		{Secret: "apps/sh.helm.release.v1.api.v7", Release: "api", Revision: 7, Status: "deployed"},
		{Secret: "other/sh.helm.release.v1.web.v9", Release: "web", Revision: 9, Status: "deployed"},
	}
	require.Equal(t, &found[1], LatestStorage(hr, found))
}
