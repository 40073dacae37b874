package slack

import (
	"context"
	"net/http"
	"testing"

	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
)

// TestClientsCallWithTheTokensOfTheMoment: a bot token other than the last one gets a client that calls with it, and
// every apps.connections.open (Socket Mode's connection, also the ones it opens again by itself through the same
// client) carries the app-level token of that moment.
func TestClientsCallWithTheTokensOfTheMoment(t *testing.T) {
	rec := slackrec.New(t)
	bot, app := "xoxb-first", "xapp-first"
	rec.SetAppTokens("xapp-first")
	c := NewClients(func() string { return bot }, func() string { return app }, http.DefaultClient, slack.OptionAPIURL(rec.GetAPIURL()))
	ctx := context.Background()
	view := slack.ModalViewRequest{Type: slack.VTModal, Title: slack.NewTextBlockObject(slack.PlainTextType, "t", false, false)}

	client := c.Client()
	_, _, err := client.StartSocketModeContext(ctx)
	require.NoError(t, err)
	_, err = client.OpenViewContext(ctx, "trigger", view)
	require.NoError(t, err)
	require.Same(t, client, c.Client(), "the same tokens keep the client")

	bot, app = "xoxb-second", "xapp-second"
	rec.SetAppTokens("xapp-second") // the old app token is revoked
	_, _, err = client.StartSocketModeContext(ctx)
	require.NoError(t, err, "the client of before opens the next connection with the new app token")
	_, err = c.Client().OpenViewContext(ctx, "trigger", view)
	require.NoError(t, err)

	require.Equal(t, []string{"xapp-first", "xapp-second"}, rec.OpenedWith())
	var tokens []string
	for _, v := range rec.Views() {
		tokens = append(tokens, v.Token)
	}
	require.Equal(t, []string{"xoxb-first", "xoxb-second"}, tokens)
}
