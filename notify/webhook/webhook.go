package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/notify"
)

// SignatureHeader carries the HMAC-SHA256 of the body as "sha256=<hex>" when a secret is set.
const SignatureHeader = "X-Signature"

// maxErrorBody is how much of a failed response's body goes into the error.
const maxErrorBody = 512

// Options configure the webhook notifier.
type Options struct {
	// URL receives a POST per transition. It may carry a token, so it never appears in errors or logs.
	URL string
	// Secret signs the body (read from a file); empty: unsigned.
	Secret []byte
	// HTTPClient defaults to notify.NewHTTPClient(notify.DefaultTimeout).
	HTTPClient *http.Client
}

// Notifier posts incident.Event as JSON.
type Notifier struct {
	o Options
}

var _ notify.Notifier = (*Notifier)(nil)

// New returns a webhook notifier.
func New(o Options) (*Notifier, error) {
	if o.URL == "" {
		return nil, errors.New("webhook: a URL is required")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = notify.NewHTTPClient(notify.DefaultTimeout)
	}
	return &Notifier{o: o}, nil
}

// Sign returns the X-Signature value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Payload is the JSON body of each post: the event, and the command that applies its remedy.
type Payload struct {
	incident.Event
	// Fix is the exact `syncmedic fix <incident ID>` command, set while the incident is open and its finding has an
	// automatic remedy (the manual commands are in incident.finding.remedy.commands).
	Fix string `json:"fix,omitempty"`
}

// NewPayload returns the body posted for ev.
func NewPayload(ev incident.Event) Payload {
	p := Payload{Event: ev}
	if ev.Incident.ID != "" && ev.Incident.IsOpen() && ev.Incident.Finding.Remedy.Action != syncmedic.ActionNone {
		p.Fix = syncmedic.FixCommand(ev.Incident.ID)
	}
	return p
}

// Notify posts ev as a Payload; 5xx, 429 and network errors are retried, other statuses are not.
func (n *Notifier) Notify(ctx context.Context, ev incident.Event) (bool, error) {
	body, err := json.Marshal(NewPayload(ev))
	if err != nil {
		return false, fmt.Errorf("webhook: encode event: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.o.URL, bytes.NewReader(body))
	if err != nil {
		return false, notify.Redact(fmt.Errorf("webhook: %w", err), n.o.URL)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "syncmedic/"+syncmedic.Version)
	if len(n.o.Secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(n.o.Secret, body))
	}
	resp, err := n.o.HTTPClient.Do(req)
	if err != nil {
		return true, notify.Redact(fmt.Errorf("webhook: %w", err), n.o.URL, string(n.o.Secret))
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, resp.Body)
	retry, err := notify.CheckResponse(resp, string(excerpt))
	if err != nil {
		return retry, notify.Redact(fmt.Errorf("webhook: %w", err), n.o.URL, string(n.o.Secret))
	}
	return false, nil
}
