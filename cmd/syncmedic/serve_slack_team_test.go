package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
)

// TestServePinsTheSlackWorkspace runs serve with --slack-team-id against the Slack test server (whose auth.test
// answers team T024BE7LD): a bot token of another workspace stops serve with exit 2 naming the flag and both
// workspaces; with the right one serve starts, refuses a signed click from another workspace with 403 and logs it.
func TestServePinsTheSlackWorkspace(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	slack := slackrec.New(t)
	const secret = "slack-signing-secret-for-the-team-test"
	args := func(team string) []string {
		return append([]string{"--state-file", filepath.Join(t.TempDir(), "state.json"), "--slack-team-id", team,
			"--slack-token-file", writeFile(t, "slack-token", "xoxb-team-test"), "--slack-channel", "#incidents",
			"--slack-api-url", slack.GetAPIURL(), "--slack-signing-secret-file", writeFile(t, "signing-secret", secret)}, fluxTokenArgs(t)...)
	}

	var out, errb testenv.LockedBuffer
	code := run(context.Background(), append([]string{"serve", "--listen", freeAddr(t)}, args("T0OTHER")...), &out, &errb)
	require.Equal(t, exitUsage, code, errb.String())
	require.Contains(t, errb.String(), "--slack-team-id T0OTHER: auth.test: the bot token belongs to workspace T024BE7LD (SlackTest Team), not T0OTHER")

	code = run(context.Background(), append([]string{"serve", "--listen", freeAddr(t), "--slack-team-id", "T024BE7LD"}, fluxTokenArgs(t)...), &out, &errb)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errb.String(), "--slack-team-id needs --slack-token-file")

	srv := startServe(t, args("T024BE7LD")...)
	require.Contains(t, srv.Logs.String(), "slack: the bot token belongs to the pinned workspace")
	body := slackrec.FormBody(slackrec.BlockActions("U0ALICE", "alice", "T0EVIL", "C0INC", "1710072000.000001", slacknotify.ActionAcknowledge, "inc-1", "trig-1"))
	status, answer, err := slackrec.PostInteraction(srv.Base+slacknotify.InteractionsPath, slackrec.Sign(secret, time.Now(), body), body)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, status, answer)
	require.Equal(t, "the interaction comes from workspace \"T0EVIL\", not T024BE7LD\n", answer)
	require.Eventually(t, func() bool {
		return strings.Contains(srv.Logs.String(), `msg="slack: interaction refused" app=syncmedic component=slack-interactivity reason="the interaction comes from workspace \"T0EVIL\", not T024BE7LD" user=U0ALICE`)
	}, 5*time.Second, 20*time.Millisecond, srv.Logs)
}
