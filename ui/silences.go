package ui

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/silence"
)

// SilencesPath lists and creates silences; SilencesPath + "/{id}" is one silence (GET, DELETE to expire it).
const SilencesPath = "/api/v1/silences"

// maxSilenceBody bounds the body of a silence creation.
const maxSilenceBody = 64 << 10

// SilenceList is the answer to GET /api/v1/silences.
type SilenceList struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Items      []Silence `json:"items"`
}

// Silence is a silence as the API shows it: the stored silence and its state now.
type Silence struct {
	silence.Silence
	State silence.State `json:"state"`
}

// SilenceAPI is what the silence endpoints need from the tracker (incident.Tracker has it).
type SilenceAPI interface {
	Silences() []silence.Silence
	GetSilence(id string) (silence.Silence, bool)
	CreateSilence(ctx context.Context, s silence.Silence) (silence.Silence, error)
	ExpireSilence(ctx context.Context, id string) error
	Now() time.Time
}

// silences serves SilencesPath: GET lists, POST creates (policy silenceBy; silenceAllBy too for a silence about no one
// application or object).
func (a *api) silences(w http.ResponseWriter, r *http.Request) {
	if a.o.Silences == nil {
		writeError(w, http.StatusNotImplemented, "this syncmedic keeps no silences")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		now := a.o.Silences.Now()
		items := []Silence{}
		s := scopeOf(r.Context())
		for _, sil := range a.o.Silences.Silences() {
			if s.allowsSilence(sil) {
				items = append(items, Silence{Silence: sil, State: sil.State(now)})
			}
		}
		writeJSON(w, http.StatusOK, SilenceList{APIVersion: APIVersion, Kind: "SilenceList", Items: items})
	case http.MethodPost:
		a.createSilence(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeError(w, http.StatusMethodNotAllowed, "silences are listed with GET and created with POST "+SilencesPath)
	}
}

func (a *api) createSilence(w http.ResponseWriter, r *http.Request) {
	body, ok := readJSONBody(w, r, maxSilenceBody, "silence")
	if !ok {
		return
	}
	c := caller(r)
	if !a.maySilence(w, c) {
		return
	}
	sil, err := silence.DecodeRequest(body, callerName(c), a.o.Silences.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if s := scopeOf(r.Context()); !s.allowsSilence(sil) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("from the Argo CD extension a silence must match its Application exactly: "+
			"add the matchers %s=%q, %s=%q and %s=%q (not regular expressions)",
			silence.LabelApp, s.app, silence.LabelAppNamespace, s.appNamespace, silence.LabelProject, s.project))
		return
	}
	if !sil.Targeted() {
		if _, ok := a.o.Policy().MaySilenceAll(c); !ok {
			writeError(w, http.StatusForbidden, "policy: this silence is about no one application or object (it has no exact app or name matcher) "+
				"and could mute every team's incidents; "+c.String()+" may not create such silences: add an exact app or name matcher, "+
				"or list who may in silenceAllBy")
			return
		}
	}
	created, err := a.o.Silences.CreateSilence(r.Context(), sil)
	if err != nil {
		writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, Silence{Silence: created, State: created.State(a.o.Silences.Now())})
}

// silence serves SilencesPath + "/{id}": GET shows it, DELETE expires it (policy silenceBy).
func (a *api) silence(w http.ResponseWriter, r *http.Request) {
	if a.o.Silences == nil {
		writeError(w, http.StatusNotImplemented, "this syncmedic keeps no silences")
		return
	}
	id := strings.TrimPrefix(r.URL.Path, SilencesPath+"/")
	sil, ok := a.o.Silences.GetSilence(id)
	if !ok {
		writeError(w, http.StatusNotFound, "no silence "+id)
		return
	}
	if s := scopeOf(r.Context()); !s.allowsSilence(sil) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("silence %s is not pinned to the Application %s/%s of project %s: from the Argo CD "+
			"extension only silences with the matchers %s=%q, %s=%q and %s=%q are shown and expired", id, s.appNamespace, s.app, s.project,
			silence.LabelApp, s.app, silence.LabelAppNamespace, s.appNamespace, silence.LabelProject, s.project))
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodDelete:
		c := caller(r)
		if !a.maySilence(w, c) {
			return
		}
		if err := a.o.Silences.ExpireSilence(r.Context(), id); err != nil {
			writeEngineError(w, err)
			return
		}
		a.o.Log.Info("silence expired through the API", "silence", id, "who", c.String())
		sil, _ = a.o.Silences.GetSilence(id)
	default:
		w.Header().Set("Allow", "GET, HEAD, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "a silence is read with GET and expired with DELETE")
		return
	}
	writeJSON(w, http.StatusOK, Silence{Silence: sil, State: sil.State(a.o.Silences.Now())})
}

// maySilence answers 403 unless the policy's silenceBy lets c create and expire silences.
func (a *api) maySilence(w http.ResponseWriter, c policy.Caller) bool {
	if a.o.Policy != nil {
		if _, ok := a.o.Policy().MaySilence(c); ok {
			return true
		}
	}
	writeError(w, http.StatusForbidden, "policy: "+c.String()+" may not create or expire silences; list who may in silenceBy")
	return false
}

// allowsSilence reports whether a scoped (Argo CD extension) request may see, create or expire sil: only silences
// pinned to its Application (exact matchers on its name, namespace and project), which mute nothing of another
// team's Application of the same name nor of a HelmRelease.
func (s scope) allowsSilence(sil silence.Silence) bool {
	if s.app == "" {
		return true
	}
	return sil.Pins(s.app, s.appNamespace, s.project)
}
