package flux

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	eventv1beta1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

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

// Subject returns the subject this event is about: "flux/<namespace>/<name>" when it concerns a HelmRelease,
// KustomizationSubject when it concerns a Kustomization, and "" otherwise.
func (e *Event) Subject() string {
	o := e.InvolvedObject
	if o.Namespace == "" || o.Name == "" {
		return ""
	}
	switch {
	case o.Kind == helmv2.HelmReleaseKind && (o.APIVersion == "" || strings.HasPrefix(o.APIVersion, helmv2.GroupVersion.Group+"/")):
		return ReleaseSubject(o.Namespace, o.Name)
	case o.Kind == KustomizationKind && (o.APIVersion == "" || strings.HasPrefix(o.APIVersion, KustomizationGroup+"/")):
		return KustomizationSubject(o.Namespace, o.Name)
	}
	return ""
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
	// The events Flux sends take decodeEventFast's single pass; anything else takes one json.Unmarshal, which
	// validates and decodes in a single pass and rejects anything after the object.
	ev, ok := decodeEventFast(body)
	if !ok {
		ev = &Event{}
		if err := unmarshalEvent(body, ev); err != nil {
			return nil, err
		}
	}
	switch {
	case ev.InvolvedObject.Kind == "":
		return nil, fmt.Errorf("%w: involvedObject.kind is required", ErrMalformedEvent)
	case ev.InvolvedObject.Name == "":
		return nil, fmt.Errorf("%w: involvedObject.name is required", ErrMalformedEvent)
	case !validSeverities[ev.Severity]:
		return nil, fmt.Errorf("%w: severity %q is not one of trace, info, error", ErrMalformedEvent, truncate(ev.Severity, 32))
	}
	return ev, nil
}

func unmarshalEvent(body []byte, ev *Event) error {
	if err := json.Unmarshal(body, ev); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) && strings.Contains(syn.Error(), "after top-level value") {
			return fmt.Errorf("%w: unexpected data after the JSON object", ErrMalformedEvent)
		}
		return fmt.Errorf("%w: %s", ErrMalformedEvent, oneLine(err))
	}
	return nil
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

// decodeEventFast decodes the events notification-controller sends — a JSON object whose keys are exactly the
// Event's JSON names, with string values (metadata an object of strings, the objects' fields strings) — in one
// pass with no reflection, the strings sharing one copy of the body. ok is false for anything else (unknown or
// differently cased keys, nulls, numbers, escapes it does not take on, invalid JSON, data after the object):
// json.Unmarshal then decides, so the result and the errors are always exactly json.Unmarshal's.
func decodeEventFast(body []byte) (*Event, bool) {
	d := eventDecoder{b: body, s: string(body)}
	ev := &Event{}
	if !d.object(func(key string) bool {
		switch key {
		case "involvedObject":
			return d.objectRef(&ev.InvolvedObject)
		case "relatedObject":
			if ev.RelatedObject == nil {
				ev.RelatedObject = &corev1.ObjectReference{}
			}
			return d.objectRef(ev.RelatedObject)
		case "severity":
			return d.str(&ev.Severity)
		case "timestamp":
			var ts string
			if !d.str(&ts) {
				return false
			}
			// What metav1.Time.UnmarshalJSON does with a string, without its second json.Unmarshal of it.
			t, err := time.Parse(time.RFC3339, ts)
			if err != nil {
				return false
			}
			ev.Timestamp.Time = t.Local()
			return true
		case "message":
			return d.str(&ev.Message)
		case "reason":
			return d.str(&ev.Reason)
		case "reportingController":
			return d.str(&ev.ReportingController)
		case "reportingInstance":
			return d.str(&ev.ReportingInstance)
		case "action":
			return d.str(&ev.Action)
		case "metadata":
			if ev.Metadata == nil {
				ev.Metadata = map[string]string{}
			}
			return d.object(func(k string) bool {
				var v string
				if !d.str(&v) {
					return false
				}
				ev.Metadata[k] = v
				return true
			})
		}
		return false
	}) {
		return nil, false
	}
	return ev, d.space() == len(d.b)
}

// eventDecoder reads b, whose copy s the decoded strings are cut from.
type eventDecoder struct {
	b []byte
	s string
	i int
}

func (d *eventDecoder) space() int {
	for d.i < len(d.b) && (d.b[d.i] == ' ' || d.b[d.i] == '\t' || d.b[d.i] == '\n' || d.b[d.i] == '\r') {
		d.i++
	}
	return d.i
}

// object reads {"key": value, …}, field reading each value.
func (d *eventDecoder) object(field func(key string) bool) bool {
	if d.space() >= len(d.b) || d.b[d.i] != '{' {
		return false
	}
	d.i++
	if d.space() < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return true
	}
	for {
		var key string
		if d.space(); !d.str(&key) {
			return false
		}
		if d.space() >= len(d.b) || d.b[d.i] != ':' {
			return false
		}
		d.i++
		d.space()
		if !field(key) {
			return false
		}
		if d.space() >= len(d.b) {
			return false
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string without escapes, control characters or bytes that are not valid UTF-8.
func (d *eventDecoder) str(into *string) bool {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return false
	}
	start := d.i + 1
	ascii := true
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			if !ascii && !utf8.Valid(d.b[start:j]) {
				return false
			}
			*into = d.s[start:j]
			d.i = j + 1
			return true
		case c == '\\' || c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return false
}

func (d *eventDecoder) objectRef(o *corev1.ObjectReference) bool {
	return d.object(func(key string) bool {
		switch key {
		case "kind":
			return d.str(&o.Kind)
		case "namespace":
			return d.str(&o.Namespace)
		case "name":
			return d.str(&o.Name)
		case "uid":
			var uid string
			if !d.str(&uid) {
				return false
			}
			o.UID = types.UID(uid)
			return true
		case "apiVersion":
			return d.str(&o.APIVersion)
		case "resourceVersion":
			return d.str(&o.ResourceVersion)
		case "fieldPath":
			return d.str(&o.FieldPath)
		}
		return false
	})
}
