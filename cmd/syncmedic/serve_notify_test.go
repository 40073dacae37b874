package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
)

func TestNotifyFlagsBuildTheDestinations(t *testing.T) {
	dir := t.TempDir()
	secret := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	token, empty := secret("token", "am-token-123\n"), secret("empty", "\n")
	password := secret("password", "am-pass-456")
	for _, tc := range []struct {
		name    string
		args    []string
		dests   []string
		timeout time.Duration
		err     string
	}{
		{name: "no notifier flags give no destination without a cluster", dests: []string{}, timeout: 10 * time.Second},
		{name: "an Alertmanager URL gives the alertmanager destination, bounded by the default timeout",
			args: []string{"--alertmanager-url=http://alertmanager.monitoring:9093"}, dests: []string{"alertmanager"}, timeout: 10 * time.Second},
		{name: "several Alertmanager URLs, repeated or comma-separated, are one destination posting to each",
			args:  []string{"--alertmanager-url=http://am-0:9093,http://am-1:9093", "--alertmanager-url=http://am-2:9093", "--alertmanager-bearer-token-file=" + token},
			dests: []string{"alertmanager"}, timeout: 10 * time.Second},
		{name: "--notify-timeout bounds every destination's attempts",
			args:  []string{"--webhook-url=http://hooks.example.com/x", "--alertmanager-url=http://am:9093", "--alertmanager-username=syncmedic", "--alertmanager-password-file=" + password, "--notify-timeout=3s"},
			dests: []string{"webhook", "alertmanager"}, timeout: 3 * time.Second},
		{name: "a zero --notify-timeout is refused", args: []string{"--notify-timeout=0s"}, err: "--notify-timeout must be positive"},
		{name: "an Alertmanager URL without a scheme is refused, naming the flag", args: []string{"--alertmanager-url=am:9093"},
			err: "--alertmanager-url: alertmanager: URL am:9093: want http(s)://host:port"},
		{name: "Alertmanager credentials without a URL are refused", args: []string{"--alertmanager-bearer-token-file=" + token},
			err: "need --alertmanager-url"},
		{name: "a username without a password file is refused", args: []string{"--alertmanager-url=http://am:9093", "--alertmanager-username=u"},
			err: "--alertmanager-username and --alertmanager-password-file go together"},
		{name: "a bearer token and basic auth together are refused",
			args: []string{"--alertmanager-url=http://am:9093", "--alertmanager-bearer-token-file=" + token, "--alertmanager-username=u", "--alertmanager-password-file=" + password},
			err:  "not both"},
		{name: "an empty token file is refused without printing a secret", args: []string{"--alertmanager-url=http://am:9093", "--alertmanager-bearer-token-file=" + empty},
			err: "--alertmanager-bearer-token-file: " + empty + " is empty"},
		{name: "Slack buttons without the bot token are refused: the bot posts the thread and opens the dialogs",
			args: []string{"--slack-app-token-file=" + token}, err: "need --slack-token-file"},
		{name: "Slack buttons over Socket Mode and the request URL at once are refused",
			args: []string{"--slack-token-file=" + token, "--slack-channel=#i", "--slack-app-token-file=" + token, "--slack-signing-secret-file=" + password},
			err:  "not both"},
		{name: "Slack buttons over Socket Mode with the bot token give the slack destination",
			args: []string{"--slack-token-file=" + token, "--slack-channel=#i", "--slack-app-token-file=" + token}, dests: []string{"slack"}, timeout: 10 * time.Second},
		{name: "a zero resend interval is refused", args: []string{"--alertmanager-url=http://am:9093", "--alertmanager-resend-interval=0s"},
			err: "--alertmanager-resend-interval must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o notifyOptions
			cmd := &cobra.Command{Use: "serve"}
			addNotifyFlags(cmd, &o)
			require.NoError(t, cmd.ParseFlags(tc.args))
			tracker, err := incident.NewTracker(context.Background(), incident.TrackerOptions{})
			require.NoError(t, err)
			dests, err := o.destinations(tracker, nil, "syncmedic-0")
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "am-token-123")
				require.NotContains(t, err.Error(), "am-pass-456")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.dests, destNames(dests))
			for _, d := range dests {
				require.Equal(t, tc.timeout, d.Timeout, "destination %s", d.Name)
				if d.Name == "alertmanager" {
					require.NotNil(t, d.Refresher, "open alerts are re-posted before they expire")
				}
			}
		})
	}
}

// TestServeReceivesSignedSlackClicks runs serve with the Slack request URL on: a click signed with the wrong
// secret is 401 and opens nothing; a signed Fix… click on an incident serve does not have opens the modal saying
// so, through the same fix on demand as the incident API.
func TestServeReceivesSignedSlackClicks(t *testing.T) {
	srv := slackrec.New(t)
	const signing = "slack-signing-secret-for-serve"
	s := startServe(t, "--state-file", filepath.Join(t.TempDir(), "state.json"), "--kube-events=false", "--flux-watch=false",
		"--slack-token-file", writeFile(t, "slack-token", "xoxb-serve"), "--slack-channel", "#incidents", "--slack-api-url", srv.GetAPIURL(),
		"--slack-signing-secret-file", writeFile(t, "signing", signing+"\n"))
	body := slackrec.FormBody(slackrec.BlockActions("U0ALICE", "alice", "T0", "C0", "1.2", slacknotify.ActionFix, "0123456789abcdef-1", "trig"))
	code, _, err := slackrec.PostInteraction(s.Base+slacknotify.InteractionsPath, slackrec.Sign("wrong", time.Now(), body), body)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, code)
	time.Sleep(300 * time.Millisecond)
	require.Empty(t, srv.Views(), "a refused request opens nothing")

	code, answer, err := slackrec.PostInteraction(s.Base+slacknotify.InteractionsPath, slackrec.Sign(signing, time.Now(), body), body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, answer)
	require.Eventually(t, func() bool { return len(srv.Views()) == 1 }, 10*time.Second, 20*time.Millisecond, s.Logs.String())
	require.Contains(t, srv.Views()[0].View, "no incident 0123456789abcdef-1")
	require.Contains(t, s.Logs.String(), "slack buttons on: Slack posts clicks to the request URL /slack/interactions")
}
