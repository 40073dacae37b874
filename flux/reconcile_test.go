package flux

import (
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"

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
		wantErr bool
	}{
		{name: "a release never asked to reconcile gets a plain request", hr: hr(""), action: syncmedic.ActionFluxReconcile, want: requestPlain},
		{name: "a plain request not yet handled is not repeated", hr: hr("", req, after), action: syncmedic.ActionFluxReconcile, want: requestNone},
		{name: "a request handled earlier than another token is still pending", hr: hr(before, req, after), action: syncmedic.ActionFluxReconcile, want: requestNone},
		{name: "a plain request handled after the condition began escalates to force", hr: hr(after, req, after), action: syncmedic.ActionFluxReconcile, want: requestForce},
		{name: "a request handled before the condition began earns a new plain request", hr: hr(before, req, before), action: syncmedic.ActionFluxReconcile, want: requestPlain},
		{name: "a request token that is not a timestamp earns a plain request first", hr: hr("manual", req, "manual"), action: syncmedic.ActionFluxReconcile, want: requestPlain},
		{name: "a forced request handled without effect needs a person", hr: hr(after, req, after, force, after), action: syncmedic.ActionFluxReconcile, wantErr: true},
		{name: "a forced request not yet handled is not repeated", hr: hr("", req, after, force, after), action: syncmedic.ActionFluxReconcile, want: requestNone},
		{name: "exhausted retries get a reset", hr: hr(""), action: syncmedic.ActionFluxResetReconcile, want: requestReset},
		{name: "a reset not yet handled is not repeated", hr: hr(before, req, after, reset, after), action: syncmedic.ActionFluxResetReconcile, want: requestNone},
		{name: "a reset handled after the stall began is not repeated", hr: hr(after, req, after, reset, after), action: syncmedic.ActionFluxResetReconcile, wantErr: true},
		{name: "a reset handled before a new stall earns another reset", hr: hr(before, req, before, reset, before), action: syncmedic.ActionFluxResetReconcile, want: requestReset},
		{name: "an explicit force action forces", hr: hr(""), action: syncmedic.ActionFluxForceReconcile, want: requestForce},
		{name: "a handled plain request for a dependency check is not forced (force does not change the check)", hr: hr(after, req, after), action: syncmedic.ActionFluxReconcile, noForce: true, wantErr: true},
		{name: "a dependency check still gets its first plain request", hr: hr(""), action: syncmedic.ActionFluxReconcile, noForce: true, want: requestPlain},
		{name: "a non-flux action is refused", hr: hr(""), action: syncmedic.ActionHardRefresh, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason, err := decide(tt.hr, tt.action, since, !tt.noForce)
			if tt.wantErr {
				require.Error(t, err)
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
