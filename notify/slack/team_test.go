package slack

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
)

// slacktestTeam is the workspace slack-go's slacktest server answers auth.test with.
const slacktestTeam = "T024BE7LD"

func TestCheckTeamConfirmsTheBotTokensWorkspace(t *testing.T) {
	srv := slackrec.New(t)
	client := slack.New(testToken, slack.OptionAPIURL(srv.GetAPIURL()))
	require.NoError(t, CheckTeam(context.Background(), client, slacktestTeam))
	require.EqualError(t, CheckTeam(context.Background(), client, "T0OTHER"),
		"auth.test: the bot token belongs to workspace T024BE7LD (SlackTest Team), not T0OTHER")

	down := slack.New(testToken, slack.OptionAPIURL("http://127.0.0.1:1/api/"))
	require.ErrorContains(t, CheckTeam(context.Background(), down, slacktestTeam), "auth.test could not confirm the bot token's workspace: ")
}

// TestInteractionsFromAnotherWorkspaceAreRefused pins the workspace: a click whose team.id is another one is
// logged and refused both ways (403 on the request URL; acknowledged with nothing done over Socket Mode), and the
// same click from the pinned workspace plans the fix.
func TestInteractionsFromAnotherWorkspaceAreRefused(t *testing.T) {
	var logs lockedBuffer
	r := newInteractionRigWith(t, 2*time.Second, func(o *InteractionOptions) {
		o.TeamID = "T0001"
		o.Log = slog.New(slog.NewTextHandler(&logs, nil))
	})
	foreign := slackrec.BlockActions(permitted, "alice", "T0EVIL", "C0INC", "1710072000.000001", ActionFix, incidentID, "trig-evil")

	body := slackrec.FormBody(foreign)
	code, answer, err := slackrec.PostInteraction(r.http.URL+InteractionsPath, slackrec.Sign(signingSecret, time.Now(), body), body)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, "the interaction comes from workspace \"T0EVIL\", not T0001\n", answer)
	require.Nil(t, r.ways[0].deliver(t, foreign), "socket mode: acknowledged, nothing answered")
	time.Sleep(200 * time.Millisecond)
	require.Empty(t, r.actions.Calls(), "nothing done for another workspace")
	require.Empty(t, r.srv.Views())
	require.Equal(t, 2, bytes.Count([]byte(logs.String()), []byte(`msg="slack: interaction refused" reason="the interaction comes from workspace \"T0EVIL\", not T0001" user=`+permitted)))

	require.Nil(t, r.ways[1].deliver(t, slackrec.BlockActions(permitted, "alice", "T0001", "C0INC", "1710072000.000001", ActionFix, incidentID, "trig-1")))
	r.view(t, 1)
	require.Equal(t, []string{"plan " + incidentID}, r.actions.Calls(), "the pinned workspace's click plans")
}

// lockedBuffer is a bytes.Buffer safe for the log's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }
