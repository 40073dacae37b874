package ui

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/remedy"
)

// The paths the handlers serve.
const (
	// IncidentsPath lists incidents; IncidentsPath + "/{id}" is one incident.
	IncidentsPath = "/api/v1/incidents"
	// PagePath is the incident page and its assets.
	PagePath = "/ui/"
)

// Options configure the handlers.
type Options struct {
	// Incidents returns the tracker's incidents (Tracker.Incidents); it may return nil.
	Incidents func() []incident.Incident
	// Token is the API token file's content: one bare token, or lines "<name>:<token>" (one person each, matched by
	// "token:<name>" policy entries), each at least MinTokenLength characters. Required unless TokenSource is set.
	Token []byte
	// TokenSource, when set, returns the API token file's content at each request instead of Token (a token file
	// re-read when its Secret is updated in place); a new content that is invalid leaves the previous tokens in force.
	TokenSource func() []byte
	// ProxyToken is the token argocd-server's proxy extension sends (one bare token, at least MinTokenLength
	// characters, not an API token): only requests with it may carry Argo CD's identity and scope headers. Empty and
	// ProxyTokenSource nil: no proxy extension, and any Argocd-* header is refused.
	ProxyToken []byte
	// ProxyTokenSource, when set, returns the proxy token at each request instead of ProxyToken.
	ProxyTokenSource func() []byte
	// Log receives one debug line per API request (never the token).
	Log *slog.Logger
	// Fix plans and applies an incident's remedy on a person's request (remedy.Fixer.Fix); nil: the API is read-only.
	Fix func(ctx context.Context, id string, req remedy.FixRequest) (remedy.FixResult, error)
	// MayFix says whether a caller may fix an incident on demand (remedy.Fixer.MayFix), so the page and the extension
	// offer a Fix button only where the policy allows it.
	MayFix func(inc incident.Incident, c policy.Caller) (bool, string)
	// Changes returns a channel closed at the next change of the incidents (Tracker.Changes); nil: watch=true
	// re-reads the incidents every second.
	Changes func() <-chan struct{}
	// Acknowledge records that by took an incident (Tracker.Acknowledge); nil: no acknowledgement (501).
	Acknowledge func(ctx context.Context, id, by string) error
	// Silences keeps the silences (the Tracker); nil: no silence endpoints (501).
	Silences SilenceAPI
	// Policy returns the policy in force, whose ackBy and silenceBy decide who may acknowledge and silence (nil:
	// nobody), and whose trustProxyGroups whether the groups the proxy extension forwards count.
	Policy func() *policy.Policy

	// now is the limiter's clock (tests); nil: time.Now.
	now func() time.Time
}

// Handlers returns the API and page handlers keyed by the path to register them at (ServeMux patterns).
func Handlers(o Options) (map[string]http.Handler, error) {
	if o.Incidents == nil {
		return nil, errors.New("the incident API needs the tracker's incidents")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	auth, err := newAuthenticator(o)
	if err != nil {
		return nil, err
	}
	authenticate := auth.wrap
	if o.Changes == nil {
		o.Changes = func() <-chan struct{} {
			ch := make(chan struct{})
			time.AfterFunc(time.Second, func() { close(ch) })
			return ch
		}
	}
	api := &api{o: o}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	archive, err := extensionArchive()
	if err != nil {
		return nil, err
	}
	return map[string]http.Handler{
		IncidentsPath:       authenticate(http.HandlerFunc(api.list)),
		IncidentsPath + "/": authenticate(http.HandlerFunc(api.get)),
		SilencesPath:        authenticate(http.HandlerFunc(api.silences)),
		SilencesPath + "/":  authenticate(http.HandlerFunc(api.silence)),
		PagePath:            securityHeaders(http.StripPrefix(PagePath, http.FileServerFS(static))),
		// The extension is public code, fetched by argocd-server's init container without a token.
		ExtensionBundlePath:  serveBytes("text/javascript; charset=utf-8", extensionBundle),
		ExtensionArchivePath: serveBytes("application/x-tar", archive),
	}, nil
}

type api struct {
	o       Options
	streams streamLimits
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if f.Watch {
		a.logRequest(r, -1)
		release, ok := a.limitStream(w, r)
		if !ok {
			return
		}
		defer release()
		a.stream(w, r, f)
		return
	}
	items := selectIncidents(a.o.Incidents(), scopeOf(r.Context()), f, a.decorate(r))
	a.logRequest(r, len(items))
	writeJSON(w, http.StatusOK, IncidentList{APIVersion: APIVersion, Kind: "IncidentList", Items: items})
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, IncidentsPath+"/")
	if id, ok := strings.CutSuffix(id, FixSuffix); ok {
		a.fix(w, r, id)
		return
	}
	if id, ok := strings.CutSuffix(id, AckSuffix); ok {
		a.ack(w, r, id)
		return
	}
	if !readOnly(w, r) {
		return
	}
	s := scopeOf(r.Context())
	for _, inc := range a.o.Incidents() {
		if inc.ID == id && s.allows(&inc) {
			a.logRequest(r, 1)
			writeJSON(w, http.StatusOK, struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Incident
			}{APIVersion, "Incident", a.view(r, inc)})
			return
		}
	}
	writeError(w, http.StatusNotFound, "no incident "+id)
}

// view is the API view of inc for the caller of r.
func (a *api) view(r *http.Request, inc incident.Incident) Incident {
	v := newIncident(inc)
	a.decorate(r)(&v, inc)
	return v
}

// decorate adds, per incident, what the caller of r may do about it: fix, acknowledge, silence.
func (a *api) decorate(r *http.Request) func(*Incident, incident.Incident) {
	access, oncall := a.access(r), a.oncall(r)
	return func(v *Incident, inc incident.Incident) {
		v.Fix = access(inc)
		oncall(v, inc)
	}
}

// oncall fills, per incident, whether the caller of r may acknowledge and silence it (left nil when serve offers
// neither).
func (a *api) oncall(r *http.Request) func(v *Incident, inc incident.Incident) {
	c := caller(r)
	return func(v *Incident, inc incident.Incident) {
		if a.o.Policy == nil {
			return
		}
		if a.o.Acknowledge != nil {
			ok, why := a.mayAck(inc, c)
			v.AckAccess = &FixAccess{Allowed: ok, Reason: why}
		}
		if a.o.Silences != nil {
			_, ok := a.o.Policy().MaySilence(c)
			v.SilenceAccess = &FixAccess{Allowed: ok}
			if !ok {
				v.SilenceAccess.Reason = "policy: " + c.String() + " is not in silenceBy"
			}
		}
	}
}

// access says, per incident, whether the caller of r may fix it on demand (nil when serve offers no fix at all).
func (a *api) access(r *http.Request) func(incident.Incident) *FixAccess {
	c := caller(r)
	return func(inc incident.Incident) *FixAccess {
		if a.o.Fix == nil || a.o.MayFix == nil || inc.Finding.Remedy.Action == syncmedic.ActionNone {
			return nil
		}
		ok, why := a.o.MayFix(inc, c)
		return &FixAccess{Allowed: ok, Reason: why}
	}
}

func (a *api) logRequest(r *http.Request, n int) {
	a.o.Log.Debug("incident API", "path", r.URL.Path, "query", r.URL.RawQuery, "incidents", n,
		"argocdUser", r.Header.Get(headerUsername), "argocdApp", r.Header.Get(headerApplicationName))
}

// readOnly answers 405 to anything but GET and HEAD.
func readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, http.StatusMethodNotAllowed, "incidents are read with GET; a fix is requested with POST "+IncidentsPath+"/{id}"+FixSuffix+
		", an acknowledgement with POST "+IncidentsPath+"/{id}"+AckSuffix)
	return false
}

// Error is the body of every error response.
type Error struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) { writeJSON(w, code, Error{Error: msg}) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // commands keep their quotes and redirections readable; nosniff keeps it data
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// securityHeaders keeps the page to its own origin: no external script, style, image or connection.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}
