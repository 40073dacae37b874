package alertmanager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/notify"
)

const (
	// DefaultName is the destination's name in metrics, logs and the policy's routes.
	DefaultName = "alertmanager"
	// DefaultResendInterval is how often open incidents are posted again, Prometheus' own resend delay.
	DefaultResendInterval = time.Minute
	// expiryIntervals is how many resend intervals a post keeps an alert firing (Prometheus uses 4), so a few
	// failed re-posts do not resolve it.
	expiryIntervals = 4
	// maxBatch bounds the alerts in one post of a refresh.
	maxBatch = 500
	// maxErrorBody is how much of a failed response's body goes into the error.
	maxErrorBody = 512
	// alertsPath is Alertmanager's API endpoint for posting alerts.
	alertsPath = "/api/v2/alerts"
)

// Incidents is where Refresh finds what to post again: *incident.Tracker.
type Incidents interface {
	// Incidents returns every incident held, open and recently resolved.
	Incidents() []incident.Incident
	// Leading reports whether this replica leads (only the leader notifies).
	Leading() bool
}

var _ Incidents = (*incident.Tracker)(nil)

// Options configure the Alertmanager notifier.
type Options struct {
	// URLs are the Alertmanagers to post to, http(s)://host:port[/path-prefix]: every replica of a cluster, as
	// Prometheus does. A post succeeds when one of them accepts it; the others learn it at the next refresh.
	URLs []string
	// Name is the destination's name, which the policy's routes use (default DefaultName).
	Name string
	// BearerToken, or Username and Password, authenticate the posts (read from files; never in errors or logs).
	BearerToken        string
	Username, Password string
	// ResendInterval is how often open incidents are posted again (default DefaultResendInterval); each post keeps
	// the alert firing for 4 intervals.
	ResendInterval time.Duration
	// Incidents is what Refresh posts again (the tracker); nil: no refresh.
	Incidents Incidents
	// HTTPClient defaults to notify.NewHTTPClient(notify.DefaultTimeout).
	HTTPClient *http.Client
	Log        *slog.Logger
	Now        func() time.Time
}

// Notifier posts incidents as alerts to Alertmanager.
type Notifier struct {
	o         Options
	endpoints []string
	secrets   []string
}

var (
	_ notify.Notifier  = (*Notifier)(nil)
	_ notify.Refresher = (*Notifier)(nil)
)

// New returns an Alertmanager notifier, or an error naming what is wrong with the options.
func New(o Options) (*Notifier, error) {
	if len(o.URLs) == 0 {
		return nil, errors.New("alertmanager: at least one URL is required")
	}
	if o.BearerToken != "" && (o.Username != "" || o.Password != "") {
		return nil, errors.New("alertmanager: give a bearer token or a username and password, not both")
	}
	if (o.Username == "") != (o.Password == "") {
		return nil, errors.New("alertmanager: basic auth needs both a username and a password")
	}
	if o.ResendInterval < 0 {
		return nil, fmt.Errorf("alertmanager: the resend interval must be positive, not %s", o.ResendInterval)
	}
	if o.ResendInterval == 0 {
		o.ResendInterval = DefaultResendInterval
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.HTTPClient == nil {
		o.HTTPClient = notify.NewHTTPClient(notify.DefaultTimeout)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	n := &Notifier{o: o, secrets: []string{o.BearerToken, o.Password}}
	for _, raw := range o.URLs {
		ep, err := endpoint(raw)
		if err != nil {
			return nil, err
		}
		n.endpoints = append(n.endpoints, ep)
		if u, err := url.Parse(ep); err == nil {
			if p, ok := u.User.Password(); ok {
				n.secrets = append(n.secrets, p)
			}
		}
	}
	return n, nil
}

// endpoint returns the alerts endpoint under an Alertmanager's base URL.
func endpoint(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		shown := "<unparsable>"
		if err == nil {
			shown = u.Redacted()
		}
		return "", fmt.Errorf("alertmanager: URL %s: want http(s)://host:port with an optional path prefix, no query", shown)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + alertsPath
	u.RawPath = ""
	return u.String(), nil
}

// RefreshInterval is the resend interval.
func (n *Notifier) RefreshInterval() time.Duration { return n.o.ResendInterval }

// Notify posts the incident's alert as it now stands: firing until 4 resend intervals from now while open,
// resolved once it resolved.
func (n *Notifier) Notify(ctx context.Context, ev incident.Event) (bool, error) {
	return n.post(ctx, []Alert{NewAlert(ev.Incident, n.expires())})
}

// Refresh posts again, when this replica leads, every open incident routed here and announced (so that Alertmanager does not
// resolve it at its endsAt), and every one that resolved within the last 4 intervals (so an Alertmanager that
// missed the resolution learns it now rather than at the endsAt it had).
func (n *Notifier) Refresh(ctx context.Context) error {
	if n.o.Incidents == nil || !n.o.Incidents.Leading() {
		return nil
	}
	now, expires := n.o.Now(), n.expires()
	var alerts []Alert
	for _, inc := range n.o.Incidents.Incidents() {
		// An incident a silence kept from every notifier was never posted: re-posting it would announce it.
		if !inc.Route.Allows(n.o.Name) || inc.Unannounced {
			continue
		}
		if inc.IsOpen() || (inc.ResolvedAt != nil && now.Sub(*inc.ResolvedAt) < expiryIntervals*n.o.ResendInterval) {
			alerts = append(alerts, NewAlert(inc, expires))
		}
	}
	for len(alerts) > 0 {
		batch := alerts[:min(len(alerts), maxBatch)]
		alerts = alerts[len(batch):]
		if _, err := n.post(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

func (n *Notifier) expires() time.Time {
	return n.o.Now().Add(expiryIntervals * n.o.ResendInterval)
}

// post sends alerts to every Alertmanager at once. It succeeds when one accepts them (failures of the others are
// logged); otherwise it retries if any failure is worth retrying.
func (n *Notifier) post(ctx context.Context, alerts []Alert) (bool, error) {
	body, err := json.Marshal(alerts)
	if err != nil {
		return false, fmt.Errorf("alertmanager: encode alerts: %w", err)
	}
	type result struct {
		retry bool
		err   error
	}
	results := make([]result, len(n.endpoints))
	var wg sync.WaitGroup
	for i, ep := range n.endpoints {
		wg.Add(1)
		go func() {
			defer wg.Done()
			retry, err := n.postOne(ctx, ep, body)
			results[i] = result{retry, notify.Redact(err, n.secrets...)}
		}()
	}
	wg.Wait()
	var errs []error
	retry, ok := false, false
	for _, r := range results {
		if r.err == nil {
			ok = true
			continue
		}
		errs = append(errs, r.err)
		retry = retry || r.retry
	}
	if ok {
		for _, err := range errs {
			n.o.Log.Warn("an Alertmanager did not take the alerts; it gets them at the next refresh", "notifier", n.o.Name, "err", err)
		}
		return false, nil
	}
	if len(errs) == 1 {
		return retry, errs[0]
	}
	return retry, errors.Join(errs...)
}

func (n *Notifier) postOne(ctx context.Context, ep string, body []byte) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("alertmanager: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "syncmedic/"+syncmedic.Version)
	switch {
	case n.o.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+n.o.BearerToken)
	case n.o.Username != "":
		req.SetBasicAuth(n.o.Username, n.o.Password)
	}
	resp, err := n.o.HTTPClient.Do(req)
	if err != nil {
		return true, fmt.Errorf("alertmanager: %w", err)
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, resp.Body)
	if retry, err := notify.CheckResponse(resp, string(excerpt)); err != nil {
		return retry, fmt.Errorf("alertmanager %s: %w", hostOf(ep), err)
	}
	return false, nil
}

// hostOf names an endpoint in errors by its host only.
func hostOf(ep string) string {
	if u, err := url.Parse(ep); err == nil {
		return u.Host
	}
	return "<unparsable URL>"
}
