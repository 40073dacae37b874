package ui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
)

// Stream timing: changes closer together than streamCoalesce are sent as one list; a comment every
// streamKeepAlive keeps proxies from closing an idle stream; each write may take streamWriteTimeout.
var (
	streamCoalesce     = 250 * time.Millisecond
	streamKeepAlive    = 15 * time.Second
	streamWriteTimeout = 15 * time.Second
)

// stream serves GET /api/v1/incidents?watch=true: server-sent events, one "incidents" event with the filtered list
// at once and again after every change (an incident opened, updated, remediated or resolved). The page reads it
// with fetch, so it sends the bearer token like any other call.
func (a *api) stream(w http.ResponseWriter, r *http.Request, f Filter) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	s, access := scopeOf(r.Context()), a.decorate(r)
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	var last []byte
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for {
		changed := a.o.Changes()
		items := selectIncidents(a.o.Incidents(), s, f, access)
		body, err := json.Marshal(IncidentList{APIVersion: APIVersion, Kind: "IncidentList", Items: items})
		if err != nil {
			return
		}
		if !bytes.Equal(body, last) { // a change outside the filter sends nothing
			var ev bytes.Buffer
			ev.WriteString("event: incidents\ndata: ")
			ev.Write(body)
			ev.WriteString("\n\n")
			if !write(ev.Bytes()) {
				return
			}
			last = body
		}
		for waiting := true; waiting; {
			select {
			case <-r.Context().Done():
				return
			case <-keepAlive.C:
				if !write([]byte(": keep-alive\n\n")) {
					return
				}
			case <-changed:
				waiting = false
			}
		}
		select { // let a burst of changes settle into one event
		case <-r.Context().Done():
			return
		case <-time.After(streamCoalesce):
		}
	}
}
