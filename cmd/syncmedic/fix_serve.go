package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/internal/secretfile"
	"github.com/syncmedic/syncmedic/ui"
)

// serveCallTimeout bounds one call to serve's incident API; a fix that terminates and re-syncs may wait minutes for
// the operation to stop, so the confirmation gets fixApplyTimeout.
const (
	serveCallTimeout = 30 * time.Second
	fixApplyTimeout  = 10 * time.Minute
	// maxServeAnswer bounds what fix reads of one answer of serve.
	maxServeAnswer = 8 << 20
)

// offlineSkips is what `fix --offline --yes` does not do, said before it applies anything.
const offlineSkips = "Offline: applying directly through the tool's API, without serve. Skipped: serve's kill switch, " +
	"mode, scope and fixBy, its rate limit and backoff, its never-repeat memory, its per-application claim (a remedy " +
	"serve runs at the same moment is not waited for) and its incident record (serve does not know about this fix; " +
	"an automatic remedy may apply it again)."

// serveClient calls serve's incident API (--serve-url) with the API token (--serve-token-file).
type serveClient struct {
	base  *url.URL
	token string
	http  *http.Client
}

// newServeClient checks --serve-url and reads the token file.
func newServeClient(rawURL, tokenFile string) (*serveClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--serve-url %q: want serve's base URL, e.g. http://127.0.0.1:9292 after `kubectl -n syncmedic port-forward svc/syncmedic 9292`", rawURL)
	}
	if tokenFile == "" {
		return nil, errors.New("--serve-url needs --serve-token-file: a file holding one of serve's API tokens (a line of its --api-token-file, without the name)")
	}
	token, err := secretfile.Open("--serve-token-file", tokenFile)
	if err != nil {
		return nil, err
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &serveClient{base: u, token: token.Value(), http: &http.Client{}}, nil
}

// serveRefusal is serve's refusal of a fix (ui.FixRefusal) as an error.
type serveRefusal struct {
	status int
	ui.FixRefusal
}

func (e *serveRefusal) Error() string {
	return fmt.Sprintf("serve refused the fix (%d %s): %s", e.status, e.Reason, e.FixRefusal.Error)
}

// do sends one request and decodes a 200 answer into out; any other status is an error naming serve's message.
func (c *serveClient) do(ctx context.Context, method, path, query string, body, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	u := *c.base
	u.Path, u.RawQuery = c.base.Path+path, query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("serve at %s is not reachable: %w", c.base.Redacted(), redactURLError(err))
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxServeAnswer))
	if err != nil {
		return fmt.Errorf("read serve's answer: %w", err)
	}
	if res.StatusCode == http.StatusOK {
		return json.Unmarshal(b, out)
	}
	var ref ui.FixRefusal
	if json.Unmarshal(b, &ref) == nil && ref.Error != "" {
		return &serveRefusal{status: res.StatusCode, FixRefusal: ref}
	}
	return fmt.Errorf("serve answered %s: %s", res.Status, strings.TrimSpace(string(b)))
}

// redactURLError drops the URL from a transport error (serve's URL is printed once, redacted, by the caller).
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// incident returns serve's incident for id: the incident ID itself, else the open (or latest) incident of the
// fingerprint; an ID serve never saw is a usage error.
func (c *serveClient) incident(ctx context.Context, id fixID) (ui.Incident, error) {
	var list ui.IncidentList
	if err := c.do(ctx, http.MethodGet, ui.IncidentsPath, "state=all", nil, &list, serveCallTimeout); err != nil {
		return ui.Incident{}, serveError(err)
	}
	var found *ui.Incident
	for i := range list.Items {
		inc := &list.Items[i]
		switch {
		case id.incident != "" && inc.ID == id.incident:
			return *inc, nil
		case id.incident == "" && strings.HasPrefix(inc.ID, id.fingerprint+"-") && (found == nil || inc.State != "resolved"):
			found = inc
		}
	}
	if found == nil {
		return ui.Incident{}, &exitError{code: exitUsage, err: fmt.Errorf("serve at %s has no incident %s: it never saw this finding (`syncmedic scan` lists the current ones, each with its ID)", c.base.Redacted(), id.raw)}
	}
	return *found, nil
}

// fixThroughServe plans, and with --yes applies, the remedy of incident id through serve's fix API, so serve's
// policy, rate limit, never-repeat memory, per-application claim and incident record apply as to any fix on demand.
func fixThroughServe(ctx context.Context, out io.Writer, o *fixOptions, id fixID) error {
	c, err := newServeClient(o.serveURL, o.serveTokenFile)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	inc, err := c.incident(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Incident %s (%s) %s: %s\n", inc.ID, inc.State, inc.Rule, inc.Summary)
	path := ui.IncidentsPath + "/" + url.PathEscape(inc.ID) + ui.FixSuffix
	var plan ui.Fix
	if err := c.do(ctx, http.MethodPost, path, "", ui.FixRequest{}, &plan, serveCallTimeout); err != nil {
		return serveError(err)
	}
	fmt.Fprintf(out, "serve's plan, for %s (allowed by fixBy %q):\n", plan.RequestedBy, plan.AllowedBy)
	for i, s := range plan.Steps {
		fmt.Fprintf(out, "  %d. %s\n", i+1, s)
	}
	for _, w := range plan.Warnings {
		fmt.Fprintln(out, "Warning: "+w)
	}
	if !o.yes {
		fmt.Fprintln(out, "Dry run: nothing was changed. Re-run with --yes to apply this plan through serve.")
		return nil
	}
	var done ui.Fix
	if err := c.do(ctx, http.MethodPost, path, "", ui.FixRequest{Confirm: plan.Confirm}, &done, fixApplyTimeout); err != nil {
		return serveError(err)
	}
	verb := "Applied"
	switch {
	case done.Result == "dry-run":
		verb = "Not applied (the policy in force at the first write refused it):"
	case done.Error != "" && !done.Changed:
		verb = "Not applied:"
	case !done.Changed:
		verb = "Already applied, nothing changed:"
	}
	fmt.Fprintf(out, "%s %s through serve (recorded on incident %s, requested by %s)\n", verb, done.Action, inc.ID, done.RequestedBy)
	for i, s := range done.Steps {
		fmt.Fprintf(out, "  %d. %s\n", i+1, s)
	}
	if done.Result != "succeeded" {
		msg := done.Error
		if msg == "" {
			msg = "serve recorded the attempt as " + string(done.Result)
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("%s: %s", done.Action, msg)}
	}
	return nil
}

// serveError maps a failed call to serve to fix's exit codes: a refusal (policy, conflict, rate limit, unknown
// incident) is 2, an unreachable serve or an unexpected answer 3.
func serveError(err error) error {
	var ref *serveRefusal
	if errors.As(err, &ref) {
		return &exitError{code: exitUsage, err: err}
	}
	return &exitError{code: exitFailed, err: err}
}
