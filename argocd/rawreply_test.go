package argocd

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// appBytes is an auto-synced Application as Argo CD v3.1+ encodes it, with automated.enabled written as enabled
// (nil: not written, as before v3.1 or when unset).
func appBytes(t *testing.T, enabled *bool) []byte {
	t.Helper()
	a := &v1alpha1.Application{}
	a.Name = "shop"
	a.Spec.Project = "default"
	a.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{Prune: true}}
	raw, err := a.Marshal()
	require.NoError(t, err)
	if enabled == nil {
		return raw
	}
	// Re-encode spec.syncPolicy.automated with field 4 appended, as the v3 encoder writes it.
	var v uint64
	if *enabled {
		v = 1
	}
	automated := protowire.AppendVarint(protowire.AppendTag(nil, fieldAutomatedEnabled, protowire.VarintType), v)
	automated = append(protowire.AppendTag(nil, 1, protowire.VarintType), append([]byte{1}, automated...)...) // prune: true
	policy := protowire.AppendBytes(protowire.AppendTag(nil, fieldSyncPolicyAutomated, protowire.BytesType), automated)
	spec := protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "default") // project
	spec = protowire.AppendBytes(protowire.AppendTag(spec, fieldSpecSyncPolicy, protowire.BytesType), policy)
	meta := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "shop") // metadata.name
	out := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), meta)
	return protowire.AppendBytes(protowire.AppendTag(out, fieldApplicationSpec, protowire.BytesType), spec)
}

func TestAutoSyncDisabled(t *testing.T) {
	no, yes := false, true
	tests := []struct {
		name    string
		enabled *bool
		off     bool
	}{
		{"enabled: false switches auto-sync off", &no, true},
		{"enabled: true leaves it on", &yes, false},
		{"no enabled field (before v3.1, or unset) leaves it on", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := appBytes(t, tt.enabled)
			off, err := AutoSyncDisabled(raw)
			require.NoError(t, err)
			require.Equal(t, tt.off, off)
			// The generated v2.14.21 copy decodes the same bytes, skipping the field it does not know.
			a := &v1alpha1.Application{}
			require.NoError(t, a.Unmarshal(raw))
			require.Equal(t, "shop", a.Name)
			require.Equal(t, "default", a.Spec.Project)
			require.NotNil(t, a.Spec.SyncPolicy.Automated, "the copy alone cannot tell: it reads an automated policy either way")
			require.True(t, a.Spec.SyncPolicy.Automated.Prune)
		})
	}
	t.Run("an application without a sync policy is not auto-synced by this field", func(t *testing.T) {
		raw, err := (&v1alpha1.Application{}).Marshal()
		require.NoError(t, err)
		off, err := AutoSyncDisabled(raw)
		require.NoError(t, err)
		require.False(t, off)
	})
	t.Run("truncated bytes are an error, not a guess", func(t *testing.T) {
		raw := appBytes(t, &no)
		_, err := AutoSyncDisabled(raw[:len(raw)-3])
		require.Error(t, err)
	})
}

func TestProtoBoolReadsSyncWithReplaceAllowed(t *testing.T) {
	settings := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "https://argocd.example.com") // url
	v, set, err := protoBool(settings, fieldSyncWithReplaceAllowed)
	require.NoError(t, err)
	require.False(t, set, "absent: a v3.1+ server that forbids replace, or one that does not publish the setting")
	require.False(t, v)
	settings = protowire.AppendVarint(protowire.AppendTag(settings, fieldSyncWithReplaceAllowed, protowire.VarintType), 1)
	v, set, err = protoBool(settings, fieldSyncWithReplaceAllowed)
	require.NoError(t, err)
	require.True(t, set)
	require.True(t, v)
}

func FuzzAutoSyncDisabled(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x12, 0x02, 0x22, 0x00})
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = AutoSyncDisabled(raw) // never panics
	})
}

func TestRawReplyCodecEncodesTheGeneratedRequests(t *testing.T) {
	name := "shop"
	want, err := (&application.ApplicationQuery{Name: &name}).Marshal()
	require.NoError(t, err)
	got, err := rawReplyCodec{}.Marshal(&application.ApplicationQuery{Name: &name})
	require.NoError(t, err)
	require.Equal(t, want, got)
	var raw []byte
	require.NoError(t, rawReplyCodec{}.Unmarshal(want, &raw))
	require.Equal(t, want, raw)
	_, err = rawReplyCodec{}.Marshal(42)
	require.ErrorContains(t, err, "cannot encode int")
}
