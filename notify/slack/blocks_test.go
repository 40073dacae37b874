package slack

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name string, v any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(v))
	got := buf.Bytes()
	file := filepath.Join("testdata", name+".golden.json")
	if *update {
		require.NoError(t, os.WriteFile(file, got, 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "run go test ./notify/slack -update to create it")
	require.Equal(t, string(want), string(got))
}

func goldenIncident() incident.Incident {
	opened := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	since := opened.Add(-25 * time.Minute)
	f := stuckHook("migrate")
	f.Since = since
	f.Evidence = []syncmedic.Evidence{
		{Field: "metadata.deletionTimestamp", Value: since.Format(time.RFC3339), Since: &since},
		{Field: "metadata.finalizers", Value: "[argocd.argoproj.io/hook-finalizer]"},
	}
	f.Remedy.Commands = []string{`kubectl -n shop patch job migrate --type json -p '[{"op":"remove","path":"/metadata/finalizers/0"}]'`}
	f.Advisories = []string{"Argo CD v3.0.0–v3.0.15 leak hook finalizers; fixed in v3.0.16 (gitops-engine #761)."}
	return incident.Incident{ID: f.Fingerprint + "-1773144000", Fingerprint: f.Fingerprint, State: incident.StateFiring,
		Finding: f, OpenedAt: opened, UpdatedAt: opened, Plan: "policy: argocd/hook-finalizer-stuck is notify only (dry-run); set it to auto to let syncmedic apply the fix"}
}

func TestRootBlocksGolden(t *testing.T) {
	at := time.Date(2026, 3, 10, 12, 5, 0, 0, time.UTC)
	firing := goldenIncident()
	remediating := goldenIncident()
	remediating.State, remediating.Auto, remediating.Plan = incident.StateRemediating, true, "policy: auto for argocd/hook-finalizer-stuck"
	resolved := remediating
	resolved.State = incident.StateResolved
	fixedBySlack := resolved
	fixedBySlack.Attempts = []incident.Attempt{{Action: syncmedic.ActionRemoveHookFinalizer, Result: incident.ResultSucceeded, Changed: true,
		RequestedBy: "slack user alice (U024BE7LH) via slack"}}
	noRemedy := goldenIncident()
	noRemedy.Finding.Remedy.Action = syncmedic.ActionNone
	all := Buttons{Fix: true, Acknowledge: true, Silence: true}
	acked := goldenIncident()
	acked.Ack = &incident.Ack{By: "slack user alice (U024BE7LH)", At: at, TakenOverFrom: "argocd user bob"}
	acked.SilencedBy = "3f2a9c1d"
	for _, tc := range []struct {
		name    string
		inc     incident.Incident
		buttons Buttons
	}{
		{"root-firing-notify-only", firing, Buttons{}},
		{"root-remediating-auto", remediating, Buttons{}},
		{"root-resolved", resolved, Buttons{}},
		{"root-firing-buttons", firing, all},
		{"root-firing-buttons-no-fixby", firing, Buttons{Acknowledge: true, Silence: true}},
		{"root-firing-buttons-no-remedy", noRemedy, all},
		{"root-resolved-buttons-gone-outcome-shown", fixedBySlack, all},
		{"root-firing-acknowledged-silenced", acked, all},
	} {
		t.Run(tc.name, func(t *testing.T) { golden(t, tc.name, RootBlocksWith(tc.inc, at, tc.buttons)) })
	}
	t.Run("webhook-resolved", func(t *testing.T) {
		r := resolved
		end := at
		r.ResolvedAt = &end
		golden(t, "webhook-resolved", WebhookBlocks(incident.Event{Kind: incident.EventResolved, At: at, Incident: r}))
	})
}

func TestReplyTexts(t *testing.T) {
	inc := goldenIncident()
	for _, tc := range []struct {
		name string
		ev   incident.Event
		want string
	}{
		{"an opened incident has no reply: the root says it all", incident.Event{Kind: incident.EventOpened, Incident: inc}, ""},
		{"a dry-run says what would be done and why not",
			incident.Event{Kind: incident.EventRemediated, Incident: inc, Attempt: &incident.Attempt{Action: syncmedic.ActionRemoveHookFinalizer,
				Result: incident.ResultDryRun, Reason: "the kill switch is on", Steps: []string{"PatchResource"}}},
			":eyes: Dry-run: syncmedic would apply `argocd/remove-hook-finalizer`, but the kill switch is on.\n• PatchResource"},
		{"a permanent failure says it will not be retried",
			incident.Event{Kind: incident.EventRemediated, Incident: inc, Attempt: &incident.Attempt{Action: syncmedic.ActionRemoveHookFinalizer,
				Result: incident.ResultFailed, Error: "permission denied", Permanent: true}},
			":x: `argocd/remove-hook-finalizer` failed: permission denied\nRetrying cannot fix this: syncmedic will not try again."},
		{"a changed finding dates each fact with a live Slack date, not an age frozen when it was posted",
			incident.Event{Kind: incident.EventUpdated, At: inc.OpenedAt.Add(time.Hour), Incident: inc},
			":memo: The finding changed: hook Job migrate is stuck terminating: argocd.argoproj.io/hook-finalizer is never removed\n" +
				"• `metadata.deletionTimestamp` = `2026-03-10T11:35:00Z`, since <!date^1773142500^{date_short_pretty} {time}|2026-03-10T11:35:00Z>\n" +
				"• `metadata.finalizers` = `[argocd.argoproj.io/hook-finalizer]`"},
		{"a fix a person asked for names them in the thread",
			incident.Event{Kind: incident.EventRemediated, Incident: inc, Attempt: &incident.Attempt{Action: syncmedic.ActionRemoveHookFinalizer,
				Result: incident.ResultSucceeded, Changed: true, RequestedBy: "argocd user bob (groups sre) via argocd-extension", Steps: []string{"PatchResource"}}},
			":white_check_mark: `argocd/remove-hook-finalizer` succeeded (changed).\nRequested by argocd user bob (groups sre) via argocd-extension.\n• PatchResource"},
		{"names cannot inject links or mentions",
			incident.Event{Kind: incident.EventRemediating, Incident: inc, Attempt: &incident.Attempt{Action: "x", Reason: "<!channel>"}},
			":hammer_and_wrench: Applying `x` (&lt;!channel&gt;)."},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, ReplyText(tc.ev)) })
	}
}

func TestRemedyShowsTheFixCommand(t *testing.T) {
	fix := "```\nsyncmedic fix " + goldenIncident().ID + " --yes\n```"
	notifyOnly := goldenIncident()
	notifyOnly.Finding.Remedy.Action = syncmedic.ActionNone
	resolved := goldenIncident()
	resolved.State = incident.StateResolved
	for _, tc := range []struct {
		name   string
		inc    incident.Incident
		fix    bool
		byHand string
	}{
		{name: "an open incident with an automatic remedy shows the exact syncmedic fix command with its incident ID",
			inc: goldenIncident(), fix: true, byHand: "Or by hand:\n```\nkubectl -n shop patch job migrate"},
		{name: "a finding without an automatic remedy shows only the manual commands",
			inc: notifyOnly, byHand: "To fix it by hand:\n```\nkubectl -n shop patch job migrate"},
		{name: "a resolved incident no longer asks to run syncmedic fix",
			inc: resolved, byHand: "To fix it by hand:\n```\nkubectl -n shop patch job migrate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := remedyText(tc.inc)
			if tc.fix {
				require.Contains(t, text, "To fix it with syncmedic (without `--yes`, a dry run):\n"+fix)
			} else {
				require.NotContains(t, text, "syncmedic fix")
			}
			require.Contains(t, text, tc.byHand)
		})
	}
}
