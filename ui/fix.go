package ui

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/remedy"
)

// FixSuffix ends the path of an incident's fix: POST IncidentsPath + "/{id}" + FixSuffix.
const FixSuffix = "/fix"

// maxFixBody bounds the body of a fix request ({"confirm": "..."}).
const maxFixBody = 16 << 10

// FixRequest is the body of POST /api/v1/incidents/{id}/fix. Without Confirm (or with an empty body) the call is a
// dry-run that returns the plan; send the plan's confirm back to apply exactly that plan.
type FixRequest struct {
	Confirm string `json:"confirm,omitempty"`
}

// Fix is the answer to a fix request: the plan (kind FixPlan) or the outcome (kind FixResult).
type Fix struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	remedy.FixResult
	// RequestedBy is the caller as recorded in the audit trail.
	RequestedBy string `json:"requestedBy"`
}

// FixRefusal is the answer to a refused fix: why, and for a plan that changed since it was reviewed, the new plan.
type FixRefusal struct {
	Error string `json:"error"`
	// Reason is NotFound, Forbidden, Conflict, RateLimited or Unavailable.
	Reason string `json:"reason"`
	Plan   *Fix   `json:"plan,omitempty"`
}

// fix serves POST /api/v1/incidents/{id}/fix.
func (a *api) fix(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "a fix is requested with POST")
		return
	}
	if a.o.Fix == nil {
		writeError(w, http.StatusNotImplemented, "this syncmedic serves the incident API read-only")
		return
	}
	// A JSON content type keeps a cross-site form from posting here with a browser's Argo CD session (it needs a
	// CORS preflight, which neither argocd-server nor syncmedic grants).
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "send the fix request as Content-Type: application/json (an empty object {} asks for the plan)")
		return
	}
	var req FixRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFixBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "the fix request is larger than "+strconv.Itoa(maxFixBody)+" bytes")
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "cannot read the fix request: "+err.Error())
		return
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, "the fix request is not valid JSON: "+err.Error()+` (want {"confirm": "<the plan's confirm>"} or {})`)
			return
		}
	}
	if !a.visible(r, id) {
		writeError(w, http.StatusNotFound, "no incident "+id)
		return
	}
	c := caller(r)
	res, err := a.o.Fix(r.Context(), id, remedy.FixRequest{Caller: c, Confirm: req.Confirm})
	out := Fix{APIVersion: APIVersion, Kind: "FixResult", FixResult: res, RequestedBy: c.String()}
	if res.DryRun {
		out.Kind = "FixPlan"
	}
	if err != nil {
		fe, ok := remedy.IsFixError(err)
		if !ok {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		ref := FixRefusal{Error: fe.Msg, Reason: string(fe.Code)}
		if fe.Code == remedy.FixConflict && res.Confirm != "" {
			ref.Plan = &out
		}
		if fe.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int((fe.RetryAfter+time.Second-1)/time.Second)))
		}
		a.o.Log.Info("fix refused", "incident", id, "who", c.String(), "reason", fe.Code, "why", fe.Msg)
		writeJSON(w, fixStatus(fe.Code), ref)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func fixStatus(c remedy.FixErrorCode) int {
	switch c {
	case remedy.FixNotFound:
		return http.StatusNotFound
	case remedy.FixForbidden:
		return http.StatusForbidden
	case remedy.FixConflict:
		return http.StatusConflict
	case remedy.FixRateLimited:
		return http.StatusTooManyRequests
	default:
		return http.StatusServiceUnavailable
	}
}

// visible reports whether the caller's scope shows incident id (a proxy extension request sees only its
// Application's incidents).
func (a *api) visible(r *http.Request, id string) bool {
	s := scopeOf(r.Context())
	for _, inc := range a.o.Incidents() {
		if inc.ID == id {
			return s.allows(&inc)
		}
	}
	return false
}
