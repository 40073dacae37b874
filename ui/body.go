package ui

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
)

// readJSONBody reads a JSON request body of at most limit bytes, answering 415 (not JSON: a JSON content type
// keeps a cross-site form from posting with a browser's Argo CD session), 413 (too large) or 400 itself; ok is
// false when it answered.
func readJSONBody(w http.ResponseWriter, r *http.Request, limit int64, what string) ([]byte, bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "send the "+what+" as Content-Type: application/json")
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "the "+what+" is larger than "+strconv.FormatInt(limit, 10)+" bytes")
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "cannot read the "+what+": "+err.Error())
		return nil, false
	}
	return body, true
}
