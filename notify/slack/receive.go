package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// InteractionsPath is where the HTTP request URL of Slack's interactivity is served on --listen.
const InteractionsPath = "/slack/interactions"

// maxInteractionBody bounds an interaction request; Slack's payloads, a whole message's blocks included, are far
// smaller.
const maxInteractionBody = 1 << 20

// replayWindow is how long a signature is remembered: Slack's verifier refuses a timestamp more than five minutes
// off, so a request replayed later than this is refused for its age.
const replayWindow = 6 * time.Minute

// DecodeInteraction decodes the body of an interaction request (application/x-www-form-urlencoded, the JSON in
// the payload field, as Slack documents it). It accepts only the kinds syncmedic acts on: block_actions and
// view_submission.
func DecodeInteraction(body []byte) (slack.InteractionCallback, error) {
	var cb slack.InteractionCallback
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return cb, fmt.Errorf("the interaction request is not form-encoded: %w", err)
	}
	payload := form.Get("payload")
	if payload == "" {
		return cb, errors.New("the interaction request has no payload field")
	}
	return decodePayload([]byte(payload))
}

func decodePayload(payload []byte) (slack.InteractionCallback, error) {
	var cb slack.InteractionCallback
	if err := json.Unmarshal(payload, &cb); err != nil {
		return cb, fmt.Errorf("the interaction payload is not valid JSON: %w", err)
	}
	switch cb.Type {
	case slack.InteractionTypeBlockActions, slack.InteractionTypeViewSubmission:
	default:
		return cb, fmt.Errorf("interaction type %q: syncmedic acts on block_actions and view_submission only", cb.Type)
	}
	if cb.User.ID == "" {
		return cb, errors.New("the interaction payload names no user")
	}
	return cb, nil
}

// HTTPReceiver serves Slack's interactivity request URL: every request is verified with the signing secret
// (X-Slack-Signature v0 over the timestamp and body, the timestamp within five minutes) and each signature is
// accepted once; anything else is 401 and nothing is done. Slack gets its answer at once (within its 3 seconds)
// and the work goes on in the background.
type HTTPReceiver struct {
	x      *Interactions
	secret func() string // the signing secret of the moment
	now    func() time.Time
	mu     sync.Mutex
	seen   map[string]time.Time // signature → when it was accepted
}

// NewHTTPReceiver returns the request URL handler of x, each request verified with the signing secret signingSecret
// returns then (a secret file read again when its Secret is updated in place).
func NewHTTPReceiver(x *Interactions, signingSecret func() string) (*HTTPReceiver, error) {
	if signingSecret == nil || signingSecret() == "" {
		return nil, errors.New("slack interactivity over HTTP needs the app's signing secret")
	}
	return &HTTPReceiver{x: x, secret: signingSecret, now: time.Now, seen: map[string]time.Time{}}, nil
}

// ServeHTTP verifies, decodes and answers one interaction request.
func (h *HTTPReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "Slack posts interactions", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInteractionBody))
	if err != nil {
		http.Error(w, "cannot read the request", http.StatusRequestEntityTooLarge)
		return
	}
	if err := h.verify(r.Header, body); err != nil {
		h.x.o.Log.Warn("slack: interaction refused", "reason", err.Error(), "remote", r.RemoteAddr)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	cb, err := DecodeInteraction(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := h.x.fromTeam(cb); err != nil {
		h.x.o.Log.Warn("slack: interaction refused", "reason", err.Error(), "user", cb.User.ID, "remote", r.RemoteAddr)
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	answer := h.x.Handle(cb)
	if answer == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

// verify checks the signature with slack-go's verifier (which refuses a timestamp more than five minutes off) and
// refuses a signature it accepted before (a replay).
func (h *HTTPReceiver) verify(header http.Header, body []byte) error {
	sv, err := slack.NewSecretsVerifier(header, h.secret())
	if err != nil {
		return err
	}
	if _, err := sv.Write(body); err != nil {
		return err
	}
	if err := sv.Ensure(); err != nil {
		return err
	}
	sig := header.Get("X-Slack-Signature")
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for s, at := range h.seen {
		if now.Sub(at) > replayWindow {
			delete(h.seen, s)
		}
	}
	if _, dup := h.seen[sig]; dup {
		return errors.New("replayed: this signature was accepted before")
	}
	h.seen[sig] = now
	return nil
}

// RunSocketMode receives interactions over Socket Mode until ctx ends: client (built with the bot token and
// slack.OptionAppLevelToken) opens the connection with apps.connections.open, and every envelope is acknowledged
// with its answer. It reconnects by itself; it returns when ctx ends or the connection cannot be opened at all.
func (x *Interactions) RunSocketMode(ctx context.Context, client *slack.Client) error {
	sm := socketmode.New(client)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- sm.RunContext(ctx) }()
	for {
		select {
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack socket mode: %w", err)
		case evt := <-sm.Events:
			x.socketEvent(sm, evt)
		}
	}
}

func (x *Interactions) socketEvent(sm *socketmode.Client, evt socketmode.Event) {
	switch evt.Type {
	case socketmode.EventTypeConnected:
		x.o.Log.Info("slack: socket mode connected")
	case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError, socketmode.EventTypeErrorBadMessage:
		x.o.Log.Warn("slack: socket mode", "event", evt.Type, "data", fmt.Sprint(evt.Data))
	case socketmode.EventTypeInteractive:
		if evt.Request == nil {
			return
		}
		cb, ok := evt.Data.(slack.InteractionCallback)
		if !ok {
			sm.Ack(*evt.Request)
			return
		}
		if _, err := decodePayload(evt.Request.Payload); err != nil {
			x.o.Log.Warn("slack: interaction ignored", "error", err)
			sm.Ack(*evt.Request)
			return
		}
		if answer := x.Handle(cb); answer != nil {
			sm.Ack(*evt.Request, answer)
		} else {
			sm.Ack(*evt.Request)
		}
	default:
		if evt.Request != nil && evt.Request.EnvelopeID != "" {
			sm.Ack(*evt.Request) // events and commands syncmedic does not take: acknowledged so Slack does not retry
		}
	}
}

// UserGroups returns a Groups function for InteractionOptions: the user groups of a user, read with
// usergroups.list (include_users; the usergroups:read scope) through the client client returns then, and kept for
// ttl, so a burst of clicks makes one call.
func UserGroups(client func() *slack.Client, ttl time.Duration, now func() time.Time) func(ctx context.Context, userID string) ([]string, error) {
	var mu sync.Mutex
	var byUser map[string][]string
	var read time.Time
	return func(ctx context.Context, userID string) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if byUser == nil || now().Sub(read) > ttl {
			groups, err := client().GetUserGroupsContext(ctx, slack.GetUserGroupsOptionIncludeUsers(true))
			if err != nil {
				return nil, fmt.Errorf("usergroups.list: %w", err)
			}
			byUser, read = map[string][]string{}, now()
			for _, g := range groups {
				for _, u := range g.Users {
					byUser[u] = append(byUser[u], g.ID)
				}
			}
		}
		return byUser[userID], nil
	}
}
