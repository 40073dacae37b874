package main

import (
	"encoding/json"
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	eventv1beta1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic/flux"
)

// signedEvent is one request body and its X-Signature, as notification-controller's generic-hmac Provider sends it.
type signedEvent struct {
	body      []byte
	signature string
}

// fixture is the event mix the load sends and the HelmReleases the dispatch evaluates them against.
type fixture struct {
	events   []eventv1beta1.Event           // one per release, in order
	releases map[string]*helmv2.HelmRelease // by subject
	token    []byte
	seq      int // events signed so far: each request body is distinct
}

// batch signs n events, cycling over the releases' events, each with a sequence number of its own in its metadata
// (as no two events notification-controller forwards have the same body): the receiver accepts a signed body once
// within its replay window and answers a repeated one 202 without dispatching it, which would measure only its
// duplicate check.
func (fx *fixture) batch(n int) ([]signedEvent, error) {
	out := make([]signedEvent, 0, n)
	for i := range n {
		ev := fx.events[i%len(fx.events)]
		ev.Metadata = map[string]string{"revision": ev.Metadata["revision"], "token": fmt.Sprintf("%08x", fx.seq)}
		fx.seq++
		body, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		sig, err := flux.Sign(body, "sha256", fx.token)
		if err != nil {
			return nil, err
		}
		out = append(out, signedEvent{body: body, signature: sig})
	}
	return out, nil
}

// newFixture builds n events about n HelmReleases (one per release; batch signs distinct copies of them); every stuckEvery-th release is stuck
// (Ready=False DependencyNotReady although its dependency is Ready), the rest are healthy.
//
// hand-written state: the releases' status, held in memory for the dispatch to read and never written to an
// apiserver: the benchmark measures the receiver's throughput, not a controller. The real helm-controller's
// DependencyNotReady is in internal/conformance/flux TestDependencyNotReadyTakesTheWholeFluxPath.
func newFixture(n, stuckEvery int, token []byte, now time.Time) (*fixture, error) {
	fx := &fixture{releases: map[string]*helmv2.HelmRelease{}, token: token}
	for i := range n {
		ns, name := fmt.Sprintf("team-%02d", i%40), fmt.Sprintf("app-%04d", i)
		stuck := stuckEvery > 0 && i%stuckEvery == 0
		hr := &helmv2.HelmRelease{}
		hr.Namespace, hr.Name, hr.Generation = ns, name, 3
		hr.Status.ObservedGeneration = 3
		hr.Status.History = helmv2.Snapshots{{Name: name, Namespace: ns, Version: 3, Status: "deployed", ChartName: name, ChartVersion: "1.2.3"}}
		ev := eventv1beta1.Event{
			InvolvedObject: corev1.ObjectReference{APIVersion: helmv2.GroupVersion.String(), Kind: helmv2.HelmReleaseKind,
				Namespace: ns, Name: name, UID: "6f1c1d6e-2b39-4f4e-9c4e-3c6b0a1e0d2a", ResourceVersion: fmt.Sprint(100000 + i)},
			Severity: eventv1beta1.EventSeverityInfo, Timestamp: metav1.NewTime(now),
			Message: fmt.Sprintf("Helm upgrade succeeded for release %s/%s.v3 with chart %s@1.2.3", ns, name, name),
			Reason:  helmv2.UpgradeSucceededReason, ReportingController: "helm-controller", ReportingInstance: "helm-controller-7d9f8b6c5-x2x4q",
			Metadata: map[string]string{"revision": "1.2.3", "token": "b4c2f0e1"},
		}
		ready := metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: helmv2.UpgradeSucceededReason,
			Message: ev.Message, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
		if stuck {
			dep := ns + "/database"
			hr.Spec.DependsOn = []meta.NamespacedObjectReference{{Namespace: ns, Name: "database"}}
			ready = metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: meta.DependencyNotReadyReason,
				Message: fmt.Sprintf("dependency '%s' is not ready", dep), LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
			ev.Severity, ev.Reason, ev.Message = eventv1beta1.EventSeverityError, meta.DependencyNotReadyReason, ready.Message
		}
		hr.Status.Conditions = []metav1.Condition{ready}
		fx.events = append(fx.events, ev)
		fx.releases[flux.ReleaseSubject(ns, name)] = hr
		if stuck {
			db := hr.DeepCopy()
			db.Name, db.Spec.DependsOn = "database", nil
			db.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: helmv2.UpgradeSucceededReason,
				Message: "Helm upgrade succeeded for release " + ns + "/database.v3 with chart database@1.2.3", LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Hour))}}
			fx.releases[flux.ReleaseSubject(ns, "database")] = db
		}
	}
	return fx, nil
}
