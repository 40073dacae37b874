package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/slack-go/slack"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/notify"
)

// WebhookOptions configure the incoming-webhook notifier.
type WebhookOptions struct {
	// URL is the incoming-webhook URL, read from a file; it is a secret and never appears in errors or logs.
	URL string
	// HTTPClient defaults to notify.NewHTTPClient(notify.DefaultTimeout).
	HTTPClient *http.Client
}

// Webhook posts one message per transition to a Slack incoming webhook (which cannot update or thread).
type Webhook struct {
	o WebhookOptions
}

var _ notify.Notifier = (*Webhook)(nil)

// NewWebhook returns an incoming-webhook notifier.
func NewWebhook(o WebhookOptions) (*Webhook, error) {
	if o.URL == "" {
		return nil, errors.New("slack: an incoming-webhook URL is required")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = notify.NewHTTPClient(notify.DefaultTimeout)
	}
	return &Webhook{o: o}, nil
}

// Notify posts the transition: a line saying what happened, then the incident's blocks.
func (w *Webhook) Notify(ctx context.Context, ev incident.Event) (bool, error) {
	msg := &slack.WebhookMessage{Text: fallbackText(ev.Incident), Blocks: &slack.Blocks{BlockSet: WebhookBlocks(ev)}}
	err := slack.PostWebhookCustomHTTPContext(ctx, w.o.URL, w.o.HTTPClient, msg)
	if err == nil {
		return false, nil
	}
	retry, err := classify(err)
	return retry, notify.Redact(fmt.Errorf("slack incoming webhook: %w", err), w.o.URL)
}

// WebhookBlocks renders one transition for an incoming webhook: the step, then the incident as in the root message.
func WebhookBlocks(ev incident.Event) []slack.Block {
	root := RootBlocks(ev.Incident, ev.At)
	text := ReplyText(ev)
	if text == "" {
		return root
	}
	return append([]slack.Block{root[0], slack.NewSectionBlock(md(text), nil, nil)}, root[1:]...)
}
