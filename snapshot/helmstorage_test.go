package snapshot

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHelmStorageSecretsAreTheOnlySecretsKept: the reader keeps Helm's release Secrets (flux/helmrelease-ready-unknown
// reads them) and drops every other Secret of a dump, so no credential is held or printed.
func TestHelmStorageSecretsAreTheOnlySecretsKept(t *testing.T) {
	s, err := ReadPaths("../examples/stuck-cluster")
	require.NoError(t, err)
	s.Add("secrets.yaml", []byte(`apiVersion: v1
kind: Secret
type: Opaque
metadata: {name: db-password, namespace: apps}
data: {password: aHVudGVyMg==}
`))
	var names []string
	for _, u := range s.Objects {
		if u.GetKind() == "Secret" {
			names = append(names, u.GetName())
		}
	}
	require.Equal(t, []string{"sh.helm.release.v1.search.v1"}, names)
	o := s.Observe()
	for _, r := range o.Releases {
		require.True(t, r.StorageKnown, "the dump has Secrets: an absent release record is absent")
		if r.Release.Name == "search" {
			require.NotNil(t, r.Storage)
			require.Equal(t, "deployed", r.Storage.Status)
			require.Equal(t, 1, r.Storage.Revision)
		} else {
			require.Nil(t, r.Storage, r.Release.Name)
		}
	}
}
