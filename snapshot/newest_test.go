package snapshot

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewest(t *testing.T) {
	notAfter := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		content string
		want    string // RFC3339, or "" for none
	}{
		{"no timestamp", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, namespace: x}\n", ""},
		{"the newest of creation, deletion and condition times, at any depth",
			"apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, namespace: x, creationTimestamp: '2025-06-10T13:00:00Z', deletionTimestamp: '2025-06-10T13:05:00Z', finalizers: [f]}\n" +
				"status:\n  conditions:\n  - {type: Complete, status: 'True', lastTransitionTime: '2025-06-10T13:20:00Z'}\n", "2025-06-10T13:20:00Z"},
		{"fractional seconds and offsets are read",
			"apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, namespace: x, creationTimestamp: '2025-06-10T15:30:00.123456+02:00'}\n", "2025-06-10T13:30:00.123456Z"},
		{"a time after notAfter (a certificate's expiry) is ignored",
			"apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, namespace: x, creationTimestamp: '2025-06-10T13:00:00Z', annotations: {expires: '2030-01-01T00:00:00Z'}}\n", "2025-06-10T13:00:00Z"},
		{"strings that only look like times are skipped",
			"apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, namespace: x, annotations: {a: '2025-13-45T99:00:00Z', b: 'xxxx-xx-xxTxx:xx:xxZ'}}\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Snapshot{}
			s.init()
			s.Add("dump.yaml", []byte(tt.content))
			require.Empty(t, s.Problems)
			require.Equal(t, 1, s.Len())
			got := s.Newest(notAfter)
			if tt.want == "" {
				require.True(t, got.IsZero(), "got %v", got)
				return
			}
			want, err := time.Parse(time.RFC3339Nano, tt.want)
			require.NoError(t, err)
			require.True(t, want.Equal(got), "want %v, got %v", want, got)
		})
	}
}
