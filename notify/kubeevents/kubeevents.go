package kubeevents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/notify"
)

// Event reasons besides incident.EventReasonRemediation.
const (
	ReasonIncidentOpened   = "SyncmedicIncidentOpened"
	ReasonIncidentResolved = "SyncmedicIncidentResolved"
)

// maxMessage keeps Event messages readable in kubectl describe (the steps of an action can be long).
const maxMessage = 1024

// Options configure the notifier.
type Options struct {
	Client kubernetes.Interface
	// Component is the Event's source component (default "syncmedic").
	Component string
	// Host is the Event's source host (the Pod name).
	Host string
}

// Notifier creates a core/v1 Event on the object of an incident when it opens, when an automatic action ends, and
// when it resolves. Dry-run records are not actions and leave no Event.
//
// It creates each Event itself, synchronously, rather than through client-go's tools/events recorder: the recorder
// returns before writing, only logs a refused Event, drops what is still in flight when it shuts down or after 12
// failed tries, and names Events by time, so a transition delivered again after a failover becomes a second Event.
// notify.Durable marks a transition delivered when Notify succeeds; Notify succeeds only once the Event exists.
type Notifier struct {
	o Options
}

var _ notify.Notifier = (*Notifier)(nil)

// New returns a Kubernetes Events notifier.
func New(o Options) *Notifier {
	if o.Component == "" {
		o.Component = "syncmedic"
	}
	return &Notifier{o: o}
}

// Notify creates the Event for ev, if its kind has one.
func (n *Notifier) Notify(ctx context.Context, ev incident.Event) (bool, error) {
	typ, reason, msg, ok := describe(ev)
	if !ok {
		return false, nil
	}
	o := ev.Incident.Finding.Object
	ns := o.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // where kubectl shows Events of cluster-scoped objects
	}
	apiVersion := schema.GroupVersion{Group: o.Group, Version: o.Version}.String()
	now := metav1.NewTime(ev.At)
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: apiVersion, Kind: o.Kind, Namespace: o.Namespace,
			Name: o.Name, UID: typesUID(o.UID)},
		Type: typ, Reason: reason, Message: clip(msg, maxMessage),
		Source:         corev1.EventSource{Component: n.o.Component, Host: n.o.Host},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "syncmedic.io/" + n.o.Component, ReportingInstance: n.o.Host,
	}
	if ev.Seq > 0 {
		// A numbered transition has one Event name: delivered again after a crash between the create and the
		// save of its delivery, it finds its Event already there instead of adding a second one.
		e.Name = eventName(o.Name, ev.Incident.ID, ev.Seq)
	} else {
		e.GenerateName = eventPrefix(o.Name)
	}
	if _, err := n.o.Client.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{}); err != nil {
		if ev.Seq > 0 && apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return retryable(err), fmt.Errorf("create Event %s on %s: %w", reason, o, err)
	}
	return false, nil
}

// eventName is the name of the Event of transition seq of an incident: the object's name, then a hash of the
// incident and the transition.
func eventName(object, incident string, seq int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", incident, seq)))
	prefix := eventPrefix(object)
	if prefix == "." {
		prefix = "syncmedic."
	}
	return prefix + hex.EncodeToString(h[:8])
}

func describe(ev incident.Event) (typ, reason, msg string, ok bool) {
	inc := ev.Incident
	switch ev.Kind {
	case incident.EventOpened:
		return corev1.EventTypeWarning, ReasonIncidentOpened,
			fmt.Sprintf("syncmedic incident %s (%s): %s", inc.ID, inc.Finding.Rule, inc.Finding.Summary), true
	case incident.EventResolved:
		return corev1.EventTypeNormal, ReasonIncidentResolved,
			fmt.Sprintf("syncmedic incident %s (%s) resolved", inc.ID, inc.Finding.Rule), true
	case incident.EventRemediated:
		a := ev.Attempt
		if a == nil || a.Result == incident.ResultDryRun {
			return "", "", "", false
		}
		typ = corev1.EventTypeNormal
		msg = fmt.Sprintf("syncmedic applied %s for incident %s (%s): %s", a.Action, inc.ID, inc.Finding.Rule, a.Result)
		if a.RequestedBy != "" {
			msg = fmt.Sprintf("syncmedic applied %s for incident %s (%s) at the request of %s: %s", a.Action, inc.ID, inc.Finding.Rule, a.RequestedBy, a.Result)
		}
		if a.Result == incident.ResultFailed {
			typ = corev1.EventTypeWarning
			msg += ": " + a.Error
		} else if len(a.Steps) > 0 {
			msg += ": " + strings.Join(a.Steps, "; ")
		}
		return typ, incident.EventReasonRemediation, msg, true
	}
	return "", "", "", false
}

// retryable: the apiserver is overloaded, timing out, failing internally, or unreachable.
func retryable(err error) bool {
	var ne net.Error
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) ||
		errors.As(err, &ne)
}

func eventPrefix(name string) string {
	if len(name) > 200 {
		name = name[:200]
	}
	return strings.TrimSuffix(name, ".") + "."
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func typesUID(uid string) types.UID { return types.UID(uid) }
