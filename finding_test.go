package syncmedic

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestObjectRefNamesItsHelmRelease(t *testing.T) {
	for _, tc := range []struct {
		name          string
		o             ObjectRef
		wantNS, wantN string
		wantOK        bool
	}{
		{"a HelmRelease names itself", ObjectRef{Kind: "HelmRelease", Namespace: "edge", Name: "ingress"}, "edge", "ingress", true},
		{"an object a HelmRelease applied names its owner", ObjectRef{Kind: "Job", Namespace: "db", Name: "migrate",
			FluxOwner: "HelmRelease/flux-apps/postgres"}, "flux-apps", "postgres", true},
		{"an object a Kustomization applied names none", ObjectRef{Kind: "Job", Name: "x", FluxOwner: "Kustomization/flux-system/apps"}, "", "", false},
		{"an Argo CD object names none", ObjectRef{Kind: "Job", Name: "x", App: "shop"}, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, n, ok := tc.o.HelmRelease()
			require.Equal(t, []any{tc.wantNS, tc.wantN, tc.wantOK}, []any{ns, n, ok})
		})
	}
}
