package flux

import (
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic"
)

func TestDecideReconcileRequest(t *testing.T) {
	since := now.Add(-time.Hour)
	after := now.Add(-time.Minute).Format(time.RFC3339Nano)
	before := now.Add(-2 * time.Hour).Format(time.RFC3339Nano)
	hr := func(handled string, ann ...string) *helmv2.HelmRelease {
		h := release("redis", 3, 2)
		m := map[string]string{}
		for i := 0; i+1 < len(ann); i += 2 {
			m[ann[i]] = ann[i+1]
		}
		h.SetAnnotations(m)
		h.Status.LastHandledReconcileAt = handled
		return h
	}
	const req, force, reset = meta.ReconcileRequestAnnotation, helmv2.ForceRequestAnnotation, helmv2.ResetRequestAnnotation
	tests := []struct {
		name    string
		hr      *helmv2.HelmRelease
		action  syncmedic.ActionID
		noForce bool
		want    request
		// wantErr is a part of the expected error ("" for none); "-" expects an error of any text.
		wantErr string
	}{
		{name: "a release never asked to reconcile gets a plain request", hr: hr(""), action: syncmedic.ActionFluxReconcile, want: requestPlain},
		{name: "a plain request not yet handled is not repeated", hr: hr("", req, after), action: syncmedic.ActionFluxReconcile, want: requestNone},
		{name: "a request handled earlier than another token is still pending", hr: hr(before, req, after), action: syncmedic.ActionFluxReconcile, want: requestNone},
		{name: "a plain request handled after the condition began escalates to force when the upgrade itself failed",
			hr: releaseStep(hr(after, req, after), 3, helmv2.ReleaseActionUpgrade, released("False", helmv2.UpgradeFailedReason)), action: syncmedic.ActionFluxReconcile, want: requestForce},
		{name: "a plain request handled after the condition began escalates to force when the install itself failed",
			hr: releaseStep(hr(after, req, after), 3, helmv2.ReleaseActionInstall, released("False", helmv2.InstallFailedReason)), action: syncmedic.ActionFluxReconcile, want: requestForce},
		{name: "a handled request that stopped before the release step (HelmChart template, source, values) is not forced",
			hr: hr(after, req, after), action: syncmedic.ActionFluxReconcile, wantErr: "helm-controller stopped before the release step (status.lastAttemptedGeneration 0, generation 3)"},
		{name: "a handled request whose last attempt is an older generation is not forced",
			hr: releaseStep(hr(after, req, after), 2, helmv2.ReleaseActionUpgrade, released("False", helmv2.UpgradeFailedReason)), action: syncmedic.ActionFluxReconcile, wantErr: "stopped before the release step"},
		{name: "a handled request with no release action recorded (a pre-v2beta2 status) is not forced",
			hr: releaseStep(hr(after, req, after), 3, "", released("False", helmv2.UpgradeFailedReason)), action: syncmedic.ActionFluxReconcile, wantErr: "no install or upgrade was attempted"},
		{name: "a handled request whose release step did not fail is not forced",
			hr: releaseStep(hr(after, req, after), 3, helmv2.ReleaseActionUpgrade, released("True", helmv2.UpgradeSucceededReason)), action: syncmedic.ActionFluxReconcile, wantErr: "the release step did not fail (Released: True (reason UpgradeSucceeded)"},
		{name: "a failed upgrade whose retries are exhausted is not forced past them",
			hr: stalled(releaseStep(hr(after, req, after), 3, helmv2.ReleaseActionUpgrade, released("False", helmv2.UpgradeFailedReason))), action: syncmedic.ActionFluxReconcile, wantErr: "its retries are exhausted"},
		{name: "a request handled before the condition began earns a new plain request", hr: hr(before, req, before), action: syncmedic.ActionFluxReconcile, want: requestPlain},
		{name: "a request token that is not a timestamp earns a plain request first", hr: hr("manual", req, "manual"), action: syncmedic.ActionFluxReconcile, want: requestPlain},
		{name: "a forced request handled without effect needs a person", hr: hr(after, req, after, force, after), action: syncmedic.ActionFluxReconcile, wantErr: "-"},
		{name: "a forced request not yet handled is not repeated", hr: hr("", req, after, force, after), action: syncmedic.ActionFluxReconcile, want: requestNone},
		{name: "exhausted retries get a reset", hr: hr(""), action: syncmedic.ActionFluxResetReconcile, want: requestReset},
		{name: "a reset not yet handled is not repeated", hr: hr(before, req, after, reset, after), action: syncmedic.ActionFluxResetReconcile, want: requestNone},
		{name: "a reset handled after the stall began is not repeated", hr: hr(after, req, after, reset, after), action: syncmedic.ActionFluxResetReconcile, wantErr: "-"},
		{name: "a reset handled before a new stall earns another reset", hr: hr(before, req, before, reset, before), action: syncmedic.ActionFluxResetReconcile, want: requestReset},
		{name: "an explicit force action forces", hr: hr(""), action: syncmedic.ActionFluxForceReconcile, want: requestForce},
		{name: "a handled plain request for a dependency check is not forced (force does not change the check)", hr: hr(after, req, after), action: syncmedic.ActionFluxReconcile, noForce: true, wantErr: "-"},
		{name: "a dependency check still gets its first plain request", hr: hr(""), action: syncmedic.ActionFluxReconcile, noForce: true, want: requestPlain},
		{name: "a non-flux action is refused", hr: hr(""), action: syncmedic.ActionHardRefresh, wantErr: "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason, err := decide(tt.hr, tt.action, since, !tt.noForce)
			if tt.wantErr != "" {
				require.Error(t, err)
				require.Equal(t, requestNone, got)
				if tt.wantErr != "-" {
					require.ErrorIs(t, err, ErrRequestUnsuccessful)
					require.Contains(t, err.Error(), tt.wantErr)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			if got == requestNone {
				require.Contains(t, reason, "not handled yet")
			}
		})
	}
}

// releaseStep records on hr what helm-controller's release step writes: the generation attempted, the release action
// and the Released condition.
func releaseStep(hr *helmv2.HelmRelease, attempted int64, action helmv2.ReleaseAction, released metav1.Condition) *helmv2.HelmRelease {
	hr.Status.LastAttemptedGeneration = attempted
	hr.Status.LastAttemptedReleaseAction = action
	hr.Status.Conditions = append(hr.Status.Conditions, released)
	return hr
}

func released(status, reason string) metav1.Condition {
	return cond(helmv2.ReleasedCondition, status, reason, "Helm upgrade failed for release apps/redis with chart redis@18.1.0: timed out", time.Minute)
}

// stalled marks hr as helm-controller does when the remediation retries are spent.
func stalled(hr *helmv2.HelmRelease) *helmv2.HelmRelease {
	hr.Status.Conditions = append(hr.Status.Conditions, cond(meta.StalledCondition, "True", RetriesExceededReason, "Failed to upgrade after 4 attempt(s)", time.Minute))
	return hr
}
