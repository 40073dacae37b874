package policy

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
)

func TestDefaultPolicyNotifiesEverythingAndActsOnNothing(t *testing.T) {
	p, err := LoadPolicy(nil)
	require.NoError(t, err)
	for _, r := range syncmedic.Rules() {
		require.Equal(t, ModeNotify, p.For(r.ID).Mode, r.ID)
	}
	d := p.Decide(hookFinding("shop", "migrate"))
	require.False(t, d.Act)
	require.Contains(t, d.Reason, "notify only")
}

func TestPolicyDecide(t *testing.T) {
	const policy = `
defaults:
  mode: notify
rules:
  argocd/hook-finalizer-stuck:
    mode: auto
    namespaces: ["shop", "team-*"]
    projects: ["default"]
  flux/retries-exhausted:
    mode: "off"
  argocd/hook-completion-missed:
    mode: auto
  argocd/hook-immutable:
    mode: auto
    rerunHooks: true
`
	p, err := LoadPolicy([]byte(policy))
	require.NoError(t, err)
	notSafe := hookFinding("shop", "migrate")
	notSafe.Remedy.AutoSafe = false
	otherProject := hookFinding("shop", "migrate")
	otherProject.Object.Project = "platform"
	retries := syncmedic.NewFinding(syncmedic.RuleRetriesExhausted, syncmedic.ObjectRef{Tool: syncmedic.ToolFlux, Kind: "HelmRelease", Namespace: "shop", Name: "web"}, "stalled")
	retries.Remedy.Action = syncmedic.ActionFluxResetReconcile
	rerun := func(rule syncmedic.RuleID) syncmedic.Finding {
		f := hookFinding("shop", "migrate")
		f.Rule, f.Remedy.Action, f.Remedy.RerunsHooks = rule, syncmedic.ActionTerminateAndResync, true
		return f
	}
	for _, tc := range []struct {
		name   string
		f      syncmedic.Finding
		mode   Mode
		act    bool
		reason string
	}{
		{"an auto rule acts in an allowed namespace", hookFinding("shop", "migrate"), ModeAuto, true, "auto"},
		{"an auto rule acts in a namespace matching a glob", hookFinding("team-a", "migrate"), ModeAuto, true, "auto"},
		{"an auto rule does not act outside its namespaces", hookFinding("kube-system", "migrate"), ModeAuto, false, `namespace "kube-system"`},
		{"an auto rule does not act outside its projects", otherProject, ModeAuto, false, `project "platform"`},
		{"a remedy that is not auto-safe is never applied", notSafe, ModeAuto, false, "not safe"},
		{"a rule that is off does nothing", retries, ModeOff, false, "off"},
		{"a remedy that re-runs the hooks waits for a person unless the rule allows it", rerun(syncmedic.RuleHookCompletionMissed), ModeAuto, false,
			"runs every hook of the application again (migrations included): set rerunHooks: true for argocd/hook-completion-missed"},
		{"a remedy that re-runs the hooks runs where the rule sets rerunHooks", rerun(syncmedic.RuleHookImmutable), ModeAuto, true, "auto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(tc.f)
			require.Equal(t, tc.mode, d.Mode)
			require.Equal(t, tc.act, d.Act)
			require.Contains(t, d.Reason, tc.reason)
		})
	}
	t.Run("the kill switch stops every action", func(t *testing.T) {
		p.KillSwitch = true
		d := p.Decide(hookFinding("shop", "migrate"))
		require.False(t, d.Act)
		require.Contains(t, d.Reason, "kill switch")
	})
}

func TestPolicyValidationNamesTheFieldAndTheFix(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"an unknown mode", "rules:\n  argocd/operation-stuck:\n    mode: always\n", []string{"rules.argocd/operation-stuck.mode", "want off, notify or auto"}},
		{"an unknown rule", "rules:\n  argocd/nope:\n    mode: auto\n", []string{"rules.argocd/nope", "syncmedic rules"}},
		{"auto for a rule without a remedy", "rules:\n  kube/stuck-terminating:\n    mode: auto\n", []string{"rules.kube/stuck-terminating.mode", "use notify"}},
		{"a bad duration", "rules:\n  argocd/operation-stuck:\n    threshold: soon\n", []string{"soon", "5m"}},
		{"a zero rate limit", "defaults:\n  rateLimit:\n    max: -1\n", []string{"defaults.rateLimit.max", "at least 1"}},
		{"a bad namespace pattern", "defaults:\n  namespaces: [\"[\"]\n", []string{"defaults.namespaces[0]", "glob"}},
		{"an unknown field", "dryRun: true\n", []string{"dryRun", "killSwitch"}},
		{"resolveAfter below one", "resolveAfter: -2\n", []string{"resolveAfter", "1 or more"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadPolicy([]byte(tc.yaml))
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestPolicyThresholdOverridesTheCatalog(t *testing.T) {
	p, err := LoadPolicy([]byte("rules:\n  argocd/operation-stuck:\n    threshold: 45m\n"))
	require.NoError(t, err)
	d, ok := p.Threshold(syncmedic.RuleOperationStuck)
	require.True(t, ok)
	require.Equal(t, 45*time.Minute, d)
	_, ok = p.Threshold(syncmedic.RuleHookImmutable)
	require.False(t, ok)
}

func TestTheDocumentedExamplePolicyLoads(t *testing.T) {
	p, err := LoadPolicyFile("../examples/policy.yaml")
	require.NoError(t, err)
	require.Equal(t, ModeAuto, p.For(syncmedic.RuleHookFinalizerStuck).Mode)
	require.Equal(t, 1, p.For(syncmedic.RuleHelmReleaseStaleStatus).RateLimit.Max)
	require.Equal(t, Duration(time.Hour), p.For(syncmedic.RuleHelmReleaseStaleStatus).RateLimit.Window, "unset fields come from the defaults")
	require.Equal(t, ModeOff, p.For(syncmedic.RuleWebhookNamespaceOwned).Mode)
	require.Equal(t, ModeNotify, p.For(syncmedic.RuleOperationStuck).Mode)
}

// TestTheDocumentedPoliciesAutomateOnlyRulesThatRunUnattended: examples/policy.yaml and docs/serve.md's example set
// `mode: auto` only on rules whose remedy may run unattended (a rule whose remedy is proposed only, such as
// flux/retries-exhausted, would do nothing on auto), and `rerunHooks: true` wherever that remedy starts a sync.
func TestTheDocumentedPoliciesAutomateOnlyRulesThatRunUnattended(t *testing.T) {
	serveDoc, err := os.ReadFile("../docs/serve.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(serveDoc), "\n```yaml\nkillSwitch:")
	require.True(t, ok, "docs/serve.md has no policy example (a yaml block starting with killSwitch:)")
	block, _, _ = strings.Cut("killSwitch:"+block, "\n```")
	example, err := os.ReadFile("../examples/policy.yaml")
	require.NoError(t, err)
	for name, doc := range map[string]string{"docs/serve.md": block, "examples/policy.yaml": string(example)} {
		t.Run(name, func(t *testing.T) {
			p, err := LoadPolicy([]byte(doc))
			require.NoError(t, err)
			autos := 0
			for id, rp := range p.Rules {
				if rp.Mode != ModeAuto {
					continue
				}
				autos++
				r, _ := syncmedic.LookupRule(id)
				require.Contains(t, []syncmedic.Automatic{syncmedic.AutoSafe, syncmedic.AutoWithRerunHooks}, r.Automatic,
					"%s sets %s to auto, whose remedy never runs unattended (%q)", name, id, r.Automatic)
				if r.Automatic == syncmedic.AutoWithRerunHooks {
					require.True(t, p.For(id).RerunHooks != nil && *p.For(id).RerunHooks, "%s sets %s to auto without rerunHooks: true", name, id)
				}
			}
			require.NotZero(t, autos, "the example sets no rule to auto")
		})
	}
}
