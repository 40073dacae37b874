package ui

import (
	"context"
	"errors"
	"net/http"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
)

// AckSuffix ends the path of an incident's acknowledgement: POST IncidentsPath + "/{id}" + AckSuffix.
const AckSuffix = "/ack"

// maxAckBody bounds the body of an acknowledgement ({} — it has no fields).
const maxAckBody = 4 << 10

// ack serves POST /api/v1/incidents/{id}/ack: the caller takes the incident (policy ackBy). It answers the
// incident as it is now.
func (a *api) ack(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "an incident is acknowledged with POST")
		return
	}
	if a.o.Acknowledge == nil || a.o.Policy == nil {
		writeError(w, http.StatusNotImplemented, "this syncmedic serves the incident API read-only")
		return
	}
	if _, ok := readJSONBody(w, r, maxAckBody, "acknowledgement ({})"); !ok {
		return
	}
	inc, ok := a.find(r, id)
	if !ok {
		writeError(w, http.StatusNotFound, "no incident "+id)
		return
	}
	c := caller(r)
	if ok, why := a.mayAck(inc, c); !ok {
		a.o.Log.Info("acknowledgement refused", "incident", id, "who", c.String(), "why", why)
		writeError(w, http.StatusForbidden, why)
		return
	}
	if err := a.o.Acknowledge(r.Context(), id, callerName(c)); err != nil {
		writeEngineError(w, err)
		return
	}
	inc, _ = a.find(r, id)
	writeJSON(w, http.StatusOK, struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Incident
	}{APIVersion, "Incident", a.view(r, inc)})
}

// mayAck says whether c may acknowledge inc, and why not.
func (a *api) mayAck(inc incident.Incident, c policy.Caller) (bool, string) {
	if !inc.IsOpen() {
		return false, "the incident is " + string(inc.State)
	}
	if _, ok := a.o.Policy().MayAcknowledge(inc.Finding.Rule, c); !ok {
		return false, "policy: " + c.String() + " may not acknowledge " + string(inc.Finding.Rule) +
			" (ackBy, or when it is unset the rule's fixBy and silenceBy)"
	}
	return true, ""
}

// find returns incident id when the caller's scope shows it.
func (a *api) find(r *http.Request, id string) (incident.Incident, bool) {
	s := scopeOf(r.Context())
	for _, inc := range a.o.Incidents() {
		if inc.ID == id && s.allows(&inc) {
			return inc, true
		}
	}
	return incident.Incident{}, false
}

// callerName is how an acknowledgement or a silence records the caller: "argocd user alice", "token:alice" or "the
// API token holder" (the groups and the way in are in the audit log, not in who took the incident).
func callerName(c policy.Caller) string {
	switch {
	case c.User != "":
		return "argocd user " + c.User
	case c.Token != "":
		return policy.FixByToken + ":" + c.Token
	}
	return "the API token holder"
}

// writeEngineError answers an error of the tracker's on-call verbs: 404, 409, 400, 429 (a bound reached), or 503
// with Retry-After.
func writeEngineError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, incident.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, incident.ErrResolved):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, incident.ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, incident.ErrLimited):
		writeError(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, incident.ErrNotLeading), errors.Is(err, incident.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}
