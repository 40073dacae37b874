package policy

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
)

func TestSilenceByAndAckByEntriesAreValidated(t *testing.T) {
	_, err := LoadPolicy([]byte(`silenceBy: ["alice"]` + "\n" + `ackBy: ["group:["]`))
	require.ErrorContains(t, err, `silenceBy[0]: "alice", want "*"`)
	require.ErrorContains(t, err, `ackBy[0]: "group:[" is not a valid pattern`)
	_, err = LoadPolicy([]byte(`silenceBy: ["group:sre-*", "token"]`))
	require.NoError(t, err)
}

func TestWhoMayAcknowledgeAndSilence(t *testing.T) {
	const rule = syncmedic.RuleHookFinalizerStuck
	alice := Caller{User: "alice", Groups: []string{"sre"}, Via: "argocd-extension"}
	bob := Caller{User: "bob", Groups: []string{"oncall"}, Via: "argocd-extension"}
	carol := Caller{User: "carol", Groups: []string{"dev"}, Via: "argocd-extension"}
	token := Caller{Via: "api-token"}
	tests := []struct {
		name    string
		policy  string
		caller  Caller
		ack     bool
		silence bool
	}{
		{"by default nobody may do either", "", token, false, false},
		{"without ackBy, the rule's fixBy may acknowledge", "rules: {argocd/hook-finalizer-stuck: {fixBy: [\"group:sre\"]}}", alice, true, false},
		{"without ackBy, silenceBy may acknowledge and silence", "silenceBy: [\"group:oncall\"]", bob, true, true},
		{"without ackBy, someone in neither may not", "silenceBy: [\"group:oncall\"]\nrules: {argocd/hook-finalizer-stuck: {fixBy: [\"group:sre\"]}}", carol, false, false},
		{"ackBy, when set, decides alone", "ackBy: [\"user:carol\"]\nsilenceBy: [\"group:oncall\"]", bob, false, true},
		{"ackBy lets its entries in", "ackBy: [\"user:carol\"]", carol, true, false},
		{"an empty ackBy lets nobody", "ackBy: []\nsilenceBy: [\"token\"]", token, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := LoadPolicy([]byte(tt.policy))
			require.NoError(t, err)
			_, ack := p.MayAcknowledge(rule, tt.caller)
			_, sil := p.MaySilence(tt.caller)
			require.Equal(t, tt.ack, ack, "acknowledge")
			require.Equal(t, tt.silence, sil, "silence")
		})
	}
}

func TestPolicyWarnsAboutGroupsItCannotTrust(t *testing.T) {
	tests := []struct {
		name, policy string
		want         []string
	}{
		{"no group entry and no trust: no warning", `ackBy: ["user:alice"]`, nil},
		{"a group entry without trustProxyGroups matches nobody", "silenceBy: [\"user:bob\"]\nrules: {argocd/hook-finalizer-stuck: {fixBy: [\"group:sre\"]}}",
			[]string{`rules.argocd/hook-finalizer-stuck.fixBy entry "group:sre" matches nobody: group: entries match Argo CD groups only with trustProxyGroups: true (read its caveat in docs/serve.md, "Policy"), use user: entries otherwise`}},
		{"trusting groups warns about anonymous access", "trustProxyGroups: true\nsilenceBy: [\"group:sre\"]",
			[]string{"trustProxyGroups is on: group: entries match the Argocd-User-Groups header argocd-server forwards, which a browser can set itself whenever its user's token has no groups claim (local users, SSO without groups, anonymous access with users.anonymous.enabled in argocd-cm): keep anonymous access off and give every user a groups claim, or turn trustProxyGroups off and use user: entries"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := LoadPolicy([]byte(tt.policy))
			require.NoError(t, err)
			require.Equal(t, tt.want, p.Warnings())
		})
	}
}

// silenceAllBy is validated like silenceBy and decides alone who may silence about no one application or object.
func TestSilenceAllBy(t *testing.T) {
	_, err := LoadPolicy([]byte(`silenceAllBy: ["admins"]`))
	require.ErrorContains(t, err, `silenceAllBy[0]: "admins", want "*"`)
	p, err := LoadPolicy([]byte("trustProxyGroups: true\nsilenceBy: [\"group:oncall\", \"token\"]\nsilenceAllBy: [\"group:sre-leads\"]"))
	require.NoError(t, err)
	lead := Caller{User: "dana", Groups: []string{"oncall", "sre-leads"}, Via: "argocd-extension"}
	bob := Caller{User: "bob", Groups: []string{"oncall"}, Via: "argocd-extension"}
	e, ok := p.MaySilenceAll(lead)
	require.True(t, ok)
	require.Equal(t, "group:sre-leads", e)
	_, ok = p.MaySilenceAll(bob)
	require.False(t, ok, "silenceBy is not silenceAllBy")
	_, ok = p.MaySilenceAll(Caller{Via: "api-token"})
	require.False(t, ok, "nor is the token in silenceBy")
	_, ok = DefaultPolicy().MaySilenceAll(Caller{Via: "api-token"})
	require.False(t, ok, "by default nobody")
}
