package policy

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFixByEntriesAreValidated(t *testing.T) {
	tests := []struct {
		name  string
		entry string
		ok    bool
	}{
		{"a group glob is accepted", "group:sre-*", true},
		{"a user is accepted", "user:alice", true},
		{"the token entry is accepted", "token", true},
		{"everyone is accepted", "*", true},
		{"a bare name is refused", "alice", false},
		{"an empty group is refused", "group:", false},
		{"a broken glob is refused", "group:[", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadPolicy([]byte(`defaults: {fixBy: ["` + tt.entry + `"]}`))
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, "defaults.fixBy[0]")
			}
		})
	}
}
