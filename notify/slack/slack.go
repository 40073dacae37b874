package slack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"

	"github.com/slack-go/slack"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/notify"
	"github.com/syncmedic/syncmedic/policy"
)

// Note keys under which the bot keeps an incident's thread (persisted with the incident by the tracker).
const (
	NoteChannel = "slack.channel"
	NoteTS      = "slack.ts"
)

// Options configure the bot-token notifier.
type Options struct {
	// Token is the bot token (xoxb-…), read from a file; it never appears in errors or logs.
	Token string
	// TokenSource, when set, returns the bot token at each notification (a token file read again when its Secret is
	// updated in place); a token other than the last one gets a new client. Token is the first one.
	TokenSource func() string
	// Channel is the channel ID or name to post to.
	Channel string
	// Notes keeps each incident's channel and thread ts across restarts (the tracker).
	Notes notify.Notes
	// APIURL overrides https://slack.com/api/ (tests use slacktest).
	APIURL string
	// HTTPClient defaults to notify.NewHTTPClient(notify.DefaultTimeout).
	HTTPClient *http.Client
	// Buttons says which action buttons an incident's root message shows (nil: none, Slack interactivity off); it
	// is asked again at every update, so a resolved incident loses them and a policy change shows in the next one.
	Buttons func(incident.Incident) Buttons
}

// Notifier posts one root message per incident, updates it in place on every transition, and replies in its
// thread for each step.
type Notifier struct {
	o    Options
	opts []slack.Option

	mu     sync.Mutex
	token  string // the token client uses
	client *slack.Client
}

var _ notify.Notifier = (*Notifier)(nil)

// New returns a bot-token notifier.
func New(o Options) (*Notifier, error) {
	if o.Token == "" || o.Channel == "" || o.Notes == nil {
		return nil, errors.New("slack: a bot token, a channel and a note store are required")
	}
	opts := []slack.Option{}
	if o.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(o.APIURL))
	}
	if o.HTTPClient == nil {
		// slack-go's own default is http.DefaultClient, which never times out.
		o.HTTPClient = notify.NewHTTPClient(notify.DefaultTimeout)
	}
	opts = append(opts, slack.OptionHTTPClient(o.HTTPClient))
	return &Notifier{o: o, opts: opts, token: o.Token, client: slack.New(o.Token, opts...)}, nil
}

// current returns the client for the bot token of the moment (Options.TokenSource), and that token.
func (n *Notifier) current() (*slack.Client, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.o.TokenSource != nil {
		if t := n.o.TokenSource(); t != "" && t != n.token {
			n.token, n.client = t, slack.New(t, n.opts...)
		}
	}
	return n.client, n.token
}

// Notify posts or updates the root message and adds the thread reply for ev.
func (n *Notifier) Notify(ctx context.Context, ev incident.Event) (bool, error) {
	id := ev.Incident.ID
	client, token := n.current()
	channel, ts := n.thread(id, ev.Incident.Route)
	var b Buttons
	if n.o.Buttons != nil {
		b = n.o.Buttons(ev.Incident)
	}
	root := RootBlocksWith(ev.Incident, ev.At, b)
	fallback := fallbackText(ev.Incident)
	if ts == "" {
		// First message of the incident (or the opened event was lost): post the root and remember the thread.
		ch, newTS, err := client.PostMessageContext(ctx, channel, slack.MsgOptionBlocks(root...), slack.MsgOptionText(fallback, false))
		if err != nil {
			return n.classify("chat.postMessage", err, token)
		}
		n.o.Notes.SetNote(ctx, id, NoteChannel, ch)
		n.o.Notes.SetNote(ctx, id, NoteTS, newTS)
		channel, ts = ch, newTS
	} else if ev.Kind != incident.EventOpened {
		_, _, _, err := client.UpdateMessageContext(ctx, channel, ts, slack.MsgOptionBlocks(root...), slack.MsgOptionText(fallback, false))
		if err != nil {
			return n.classify("chat.update", err, token)
		}
	}
	reply := ReplyText(ev)
	if reply == "" {
		return false, nil
	}
	_, _, err := client.PostMessageContext(ctx, channel, slack.MsgOptionTS(ts), slack.MsgOptionText(reply, false))
	if err != nil {
		return n.classify("chat.postMessage (thread reply)", err, token)
	}
	return false, nil
}

// thread returns where the incident's thread is: the channel its first message went to, else the channel its
// route names (a policy route or the syncmedic.io/slack-channel annotation), else Options.Channel.
func (n *Notifier) thread(id string, route *policy.Routing) (channel, ts string) {
	channel = n.o.Channel
	if route != nil && route.SlackChannel != "" {
		channel = route.SlackChannel
	}
	if c, ok := n.o.Notes.Note(id, NoteChannel); ok && c != "" {
		channel = c
	}
	ts, _ = n.o.Notes.Note(id, NoteTS)
	return channel, ts
}

func (n *Notifier) classify(method string, err error, token string) (bool, error) {
	retry, err := classify(err)
	return retry, notify.Redact(fmt.Errorf("slack %s: %w", method, err), token)
}

// classify says whether a slack-go error is worth retrying: rate limits (after Retry-After), 5xx and network
// errors are; ok:false answers (channel_not_found, invalid_auth, …) and other statuses are not.
func classify(err error) (bool, error) {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return true, &notify.RetryAfterError{After: rl.RetryAfter, Err: err}
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		return sc.Code >= 500, err
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return true, err
	}
	return false, err
}

func fallbackText(inc incident.Incident) string {
	return fmt.Sprintf("[%s] %s: %s (%s)", inc.State, inc.Title(), inc.Finding.Summary, inc.Finding.Object)
}
