package argo

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// Helpers of the issue 26 scenarios (safety_*_test.go): automatic actions in the states the real controllers
// produce (sync windows, retries, generateName hooks).

// safetyPolicy acts on the two hook rules that can harm a paused, retrying or looping sync: hook-finalizer-stuck
// after 3 s (remove the hook finalizer) and hook-completion-missed after 15 s (terminate and re-sync, re-running the
// hooks). The row texts state these thresholds; the quiet windows of the tests are several times each.
const safetyPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: auto, threshold: 3s}
  argocd/hook-completion-missed: {mode: auto, threshold: 15s, rerunHooks: true}
` + routes

// safetyThresholds is the row text naming safetyPolicy's thresholds.
const safetyThresholds = "serve on auto: hook-finalizer-stuck 3s, hook-completion-missed 15s"

// incidentsOf returns the root messages (incidents) whose Rule field is rule.
func incidentsOf(srv *fakeSlack, rule syncmedic.RuleID) []slackMessage {
	var out []slackMessage
	for _, m := range srv.roots() {
		if strings.Contains(m.Blocks, "|"+string(rule)) {
			out = append(out, m)
		}
	}
	return out
}

// incidentAbout waits until Slack got an incident of rule about Job name in app's destination namespace, routed by
// the policy, and returns it.
func incidentAbout(t *testing.T, srv *fakeSlack, app *testenv.RealHookApp, rule syncmedic.RuleID, name string, within time.Duration) slackMessage {
	t.Helper()
	object := "`Job.batch/" + app.Namespace + "/" + name
	var root slackMessage
	require.Eventually(t, func() bool {
		for _, m := range incidentsOf(srv, rule) {
			if strings.Contains(m.Blocks, object) {
				root = m
				return true
			}
		}
		return false
	}, within, tick, "an incident of %s about %s is announced (received: %s)", rule, object, srv.summary())
	require.Equal(t, routedChannel, root.Channel, "the policy's route picks the channel")
	return root
}

// appliedRemedies returns the thread replies announcing a remedy being applied, across every thread.
func appliedRemedies(srv *fakeSlack) []string {
	var out []string
	for _, m := range srv.all() {
		if m.Method == "chat.postMessage" && m.ThreadTS != "" && strings.HasPrefix(m.Text, ":hammer_and_wrench: Applying") {
			out = append(out, firstLineOf(m.Text))
		}
	}
	return out
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// rootRulesOf lists the rule of each incident, in order.
func rootRulesOf(srv *fakeSlack) string {
	var out []string
	for _, m := range srv.roots() {
		rule := "?"
		for _, id := range []syncmedic.RuleID{syncmedic.RuleHookCompletionMissed, syncmedic.RuleHookFinalizerStuck,
			syncmedic.RuleHookImmutable, syncmedic.RuleHookNotDeleted, syncmedic.RuleOperationStuck} {
			if strings.Contains(m.Blocks, "|"+string(id)) {
				rule = string(id)
				break
			}
		}
		out = append(out, rule)
	}
	return strings.Join(out, ", ")
}
