package slack

import (
	"net/http"
	"strings"
	"sync"

	"github.com/slack-go/slack"
)

// appsConnectionsOpen is the Web API method that opens a Socket Mode connection with the app-level token.
const appsConnectionsOpen = "/apps.connections.open"

// Clients hands out the slack-go client of the tokens of the moment, for the clicks' side of Slack (views.open,
// views.update, chat.postEphemeral, usergroups.list and Socket Mode): each token is asked for at each use (a token
// file read again when its Secret is updated in place). A bot token other than the last one gets a new client;
// every apps.connections.open carries the app-level token of that moment, so Socket Mode, which opens a connection
// again whenever Slack asks it to refresh or the connection drops, connects with a rotated app token at the next
// connection without being restarted.
type Clients struct {
	bot  func() string
	opts []slack.Option

	mu     sync.Mutex
	token  string // the bot token client was built with
	client *slack.Client
}

// NewClients returns the clients of bot (the bot token) and app (the app-level token, nil without Socket Mode).
// httpClient carries every call; opts are further slack-go options (the API URL).
func NewClients(bot, app func() string, httpClient *http.Client, opts ...slack.Option) *Clients {
	var doer interface {
		Do(*http.Request) (*http.Response, error)
	} = httpClient
	if app != nil {
		doer = appTokenDoer{next: httpClient, token: app}
		opts = append(opts, slack.OptionAppLevelToken(app()))
	}
	opts = append(opts, slack.OptionHTTPClient(doer))
	return &Clients{bot: bot, opts: opts}
}

// Client returns the client of the bot token now.
func (c *Clients) Client() *slack.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.bot(); c.client == nil || (t != "" && t != c.token) {
		c.token, c.client = t, slack.New(t, c.opts...)
	}
	return c.client
}

// appTokenDoer sends apps.connections.open with the app-level token of the moment and every other call as it is.
type appTokenDoer struct {
	next  *http.Client
	token func() string
}

// Do implements slack-go's HTTP client.
func (d appTokenDoer) Do(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, appsConnectionsOpen) {
		if t := d.token(); t != "" {
			req = req.Clone(req.Context())
			req.Header.Set("Authorization", "Bearer "+t)
		}
	}
	return d.next.Do(req)
}
