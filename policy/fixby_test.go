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
		{"a Slack member ID is accepted", "slack:U024BE7LH", true},
		{"a Slack user group ID is accepted", "slack-group:S0614TZR7", true},
		{"a Slack display name is refused: only the ID is stable", "slack:alice", false},
		{"a Slack glob is refused", "slack:U*", false},
		{"an empty Slack user group is refused", "slack-group:", false},
		{"a named token is accepted", "token:alice", true},
		{"a named token glob is refused", "token:a*", false},
		{"an empty token name is refused", "token:", false},
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

func TestMayFixTellsSlackClicksFromAPICallers(t *testing.T) {
	slackAlice := Caller{SlackUser: "U024BE7LH", SlackName: "alice", SlackTeam: "T0001", SlackGroups: []string{"S0614TZR7"}, Via: "slack"}
	argoAlice := Caller{User: "alice", Groups: []string{"sre"}, Via: "argocd-extension"}
	token := Caller{Via: "api-token"}
	tests := []struct {
		name    string
		fixBy   []string
		caller  Caller
		allowed string
	}{
		{"a listed Slack member may", []string{"slack:U024BE7LH"}, slackAlice, "slack:U024BE7LH"},
		{"another Slack member may not", []string{"slack:U999"}, slackAlice, ""},
		{"a member of a listed Slack user group may", []string{"slack-group:S0614TZR7"}, slackAlice, "slack-group:S0614TZR7"},
		{"a member of another Slack user group may not", []string{"slack-group:S0000"}, slackAlice, ""},
		{"the token entry does not let a Slack click fix", []string{"token"}, slackAlice, ""},
		{"everyone means everyone who reaches the API, not everyone in a channel", []string{"*"}, slackAlice, ""},
		{"an Argo CD user of the same name is not the Slack member", []string{"user:alice", "group:sre"}, slackAlice, ""},
		{"a Slack entry does not let the Argo CD user fix", []string{"slack:U024BE7LH"}, argoAlice, ""},
		{"a Slack entry does not let the token holder fix", []string{"slack:U024BE7LH", "slack-group:S0614TZR7"}, token, ""},
		{"the token entry still lets the token holder fix", []string{"token"}, token, "token"},
		{"everyone still lets the token holder fix", []string{"*"}, token, "*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			by, ok := MayFix(tt.fixBy, tt.caller)
			require.Equal(t, tt.allowed != "", ok)
			require.Equal(t, tt.allowed, by)
		})
	}
	t.Run("the audit trail names the Slack member by name and ID", func(t *testing.T) {
		require.Equal(t, "slack user alice (U024BE7LH) via slack", slackAlice.String())
		require.Equal(t, "slack user U024BE7LH via slack", Caller{SlackUser: "U024BE7LH", Via: "slack"}.String())
	})
	t.Run("only Slack entries can let someone fix from Slack", func(t *testing.T) {
		require.True(t, SlackMayFix([]string{"token", "slack-group:S0614TZR7"}))
		require.False(t, SlackMayFix([]string{"*", "token", "user:alice"}))
		require.False(t, SlackMayFix(nil))
	})
}

func TestATokenEntryMatchesOnlyDirectCallersAndANamedOneOnlyItsHolder(t *testing.T) {
	alice := Caller{Token: "alice", Via: ViaAPIToken}
	bare := Caller{Via: ViaAPIToken}
	proxied := Caller{Via: ViaArgoCDExtension}
	proxiedAlice := Caller{User: "alice", Via: ViaArgoCDExtension}
	tests := []struct {
		name    string
		fixBy   []string
		caller  Caller
		allowed string
	}{
		{"token:alice lets alice's token", []string{"token:alice"}, alice, "token:alice"},
		{"token:alice does not let the bare token", []string{"token:alice"}, bare, ""},
		{"token:alice does not let bob's token", []string{"token:alice"}, Caller{Token: "bob", Via: ViaAPIToken}, ""},
		{"token:alice does not let the Argo CD user alice", []string{"token:alice"}, proxiedAlice, ""},
		{"token lets every named token", []string{"token"}, alice, "token"},
		{"token does not let a proxied request without a user count as the token holder", []string{"token"}, proxied, ""},
		{"user:alice does not let alice's token", []string{"user:alice"}, alice, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			by, ok := MayFix(tt.fixBy, tt.caller)
			require.Equal(t, tt.allowed != "", ok)
			require.Equal(t, tt.allowed, by)
		})
	}
	require.Equal(t, "token:alice via api-token", alice.String())
	require.Equal(t, "the API token holder via api-token", bare.String())
}
