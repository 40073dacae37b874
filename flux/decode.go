package flux

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	eventv1beta1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	corev1 "k8s.io/api/core/v1"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
)

// Event is what Flux posts to a generic or generic-hmac Provider: the Event of github.com/fluxcd/pkg/apis/event.
// The v1beta1 shape is embedded; the v1 shape adds relatedObject and action, kept here. Other unknown fields are
// ignored, so a newer Flux does not break the receiver.
type Event struct {
	eventv1beta1.Event
	// RelatedObject is an optional secondary object (event v1).
	RelatedObject *corev1.ObjectReference `json:"relatedObject,omitempty"`
	// Action says what was taken or failed, e.g. "Syncing" (event v1).
	Action string `json:"action,omitempty"`
}

// Subject returns the subject this event is about ("flux/<namespace>/<name>") when it concerns a HelmRelease, and
// "" otherwise.
func (e *Event) Subject() string {
	o := e.InvolvedObject
	if o.Kind != helmv2.HelmReleaseKind || o.Namespace == "" || o.Name == "" {
		return ""
	}
	if o.APIVersion != "" && !strings.HasPrefix(o.APIVersion, helmv2.GroupVersion.Group+"/") {
		return ""
	}
	return ReleaseSubject(o.Namespace, o.Name)
}

// ReleaseSubject is the subject under which a HelmRelease's evaluations are reported.
func ReleaseSubject(namespace, name string) string { return "flux/" + namespace + "/" + name }

// CRDSubject is the subject under which the HelmRelease CRD's evaluations are reported.
func CRDSubject(name string) string { return "flux/crd/" + name }

// ErrMalformedEvent wraps every reason an event body is rejected with 400.
var ErrMalformedEvent = errors.New("malformed event")

var validSeverities = map[string]bool{
	eventv1beta1.EventSeverityTrace: true, eventv1beta1.EventSeverityInfo: true, eventv1beta1.EventSeverityError: true,
}

// DecodeEvent parses one event body. It requires a JSON object with involvedObject.kind and involvedObject.name and
// a known severity, and nothing after the object; the error (wrapping ErrMalformedEvent) is one line fit for a 400.
func DecodeEvent(body []byte) (*Event, error) {
	// One json.Unmarshal: it validates and decodes in a single pass (the receiver's largest cost, bench/README.md)
	// and rejects anything after the object.
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) && strings.Contains(syn.Error(), "after top-level value") {
			return nil, fmt.Errorf("%w: unexpected data after the JSON object", ErrMalformedEvent)
		}
		return nil, fmt.Errorf("%w: %s", ErrMalformedEvent, oneLine(err))
	}
	switch {
	case ev.InvolvedObject.Kind == "":
		return nil, fmt.Errorf("%w: involvedObject.kind is required", ErrMalformedEvent)
	case ev.InvolvedObject.Name == "":
		return nil, fmt.Errorf("%w: involvedObject.name is required", ErrMalformedEvent)
	case !validSeverities[ev.Severity]:
		return nil, fmt.Errorf("%w: severity %q is not one of trace, info, error", ErrMalformedEvent, truncate(ev.Severity, 32))
	}
	return &ev, nil
}

func oneLine(err error) string {
	return truncate(strings.Join(strings.Fields(err.Error()), " "), 200)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
