package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/incident"
)

// DefaultTimeout bounds one attempt to deliver a notification, and one HTTP exchange of the notifiers' default
// clients, so that a destination that accepts a connection and never answers fails the attempt (which is retried)
// instead of holding its queue.
const DefaultTimeout = 10 * time.Second

// NewHTTPClient returns the HTTP client a notifier uses unless given one: each exchange, body included, is bounded
// by timeout (DefaultTimeout when zero or less), over a transport of its own with http.DefaultTransport's settings.
func NewHTTPClient(timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &http.Client{Timeout: timeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
}

// Notifier delivers one incident transition to one destination. It says whether a failure is worth retrying:
// network errors and 5xx are, 4xx and refusals (Slack ok:false) are not, and a RetryAfterError says how long to wait.
type Notifier interface {
	Notify(ctx context.Context, ev incident.Event) (retry bool, err error)
}

// NotifierFunc adapts a function to a Notifier.
type NotifierFunc func(ctx context.Context, ev incident.Event) (bool, error)

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, ev incident.Event) (bool, error) {
	return f(ctx, ev)
}

// Notes is where a notifier keeps per-incident state that must survive a restart or a failover (the Slack channel
// and thread ts). *incident.Tracker implements it and persists the notes with the incident.
type Notes interface {
	Note(incidentID, key string) (string, bool)
	SetNote(ctx context.Context, incidentID, key, value string)
}

var _ Notes = (*incident.Tracker)(nil)

// RetryAfterError is a failure the destination asked to retry after a delay (HTTP 429 with Retry-After).
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.Err, e.After)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter returns the delay a RetryAfterError in err's chain asks for.
func RetryAfter(err error) (time.Duration, bool) {
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		return ra.After, true
	}
	return 0, false
}

// CheckResponse classifies an HTTP response: 2xx is success; 429 and 5xx are retried (429 after its Retry-After);
// every other status is a permanent failure. body is a short excerpt of the response for the error.
func CheckResponse(resp *http.Response, body string) (retry bool, err error) {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	err = fmt.Errorf("unexpected status %s: %s", resp.Status, strings.TrimSpace(body))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return true, &RetryAfterError{After: parseRetryAfter(resp.Header.Get("Retry-After")), Err: err}
	case resp.StatusCode >= 500:
		return true, err
	}
	return false, err
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date; missing or invalid: one second.
func parseRetryAfter(v string) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return time.Second
}

// Redact replaces every non-empty secret in err's message with <redacted>, keeping whether to retry in the caller.
func Redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "<redacted>")
			changed = true
		}
	}
	if !changed {
		return err
	}
	if d, ok := RetryAfter(err); ok {
		return &RetryAfterError{After: d, Err: errors.New(msg)}
	}
	return errors.New(msg)
}
