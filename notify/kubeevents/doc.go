// Package kubeevents records incident transitions as Kubernetes Events on the affected object; an automatic action
// is recorded with reason incident.EventReasonRemediation, as part of its audit trail.
package kubeevents
