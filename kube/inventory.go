package kube

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// inventory builds the rules' view from the informer caches.
func (s *Scanner) inventory() Inventory {
	var inv Inventory
	list := func(gvr schema.GroupVersionResource) ([]*unstructured.Unstructured, bool) {
		inf, ok := s.watched[gvr]
		if !ok {
			return nil, false
		}
		items := inf.GetStore().List()
		out := make([]*unstructured.Unstructured, 0, len(items))
		for _, it := range items {
			if u, ok := it.(*unstructured.Unstructured); ok {
				out = append(out, u)
			}
		}
		return out, true
	}
	v, _ := list(validatingWebhooksGVR)
	m, _ := list(mutatingWebhooksGVR)
	inv.WebhookConfigurations = append(v, m...)
	inv.Services, inv.ServicesKnown = list(servicesGVR)
	inv.EndpointSlices, inv.EndpointsKnown = list(endpointSlicesGVR)
	inv.Namespaces, inv.NamespacesKnown = list(namespacesGVR)
	inv.Workflows, _ = list(workflowsGVR)
	for _, gvr := range s.stuck {
		switch gvr.GroupResource() {
		case validatingWebhooksGVR.GroupResource(), mutatingWebhooksGVR.GroupResource(), workflowsGVR.GroupResource():
			continue // already in the inventory, and checked by StuckTerminating from there
		}
		objs, _ := list(gvr)
		for _, o := range objs {
			if o.GetDeletionTimestamp() != nil { // only terminating objects matter to the rule
				inv.Objects = append(inv.Objects, o)
			}
		}
	}
	return inv
}

// NextThreshold returns the earliest future moment a time-based cluster rule could start matching an object of inv
// (deletion + Terminating or ArtifactGC, a webhook backend down + WebhookBackend), or zero when none is pending. An early extra
// evaluation is harmless; a late one would delay detection.
func NextThreshold(inv Inventory, now time.Time, th Thresholds) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, group := range [][]*unstructured.Unstructured{inv.Objects, inv.Workflows, inv.WebhookConfigurations} {
		for _, o := range group {
			if dt := o.GetDeletionTimestamp(); dt != nil && len(o.GetFinalizers()) > 0 {
				consider(dt.Add(th.Terminating))
				consider(dt.Add(th.ArtifactGC))
			}
		}
	}
	services := index(inv.Services)
	for _, cfg := range inv.WebhookConfigurations {
		created := cfg.GetCreationTimestamp().Time
		consider(created.Add(th.WebhookBackend))
		for _, w := range webhooks(cfg) {
			if w.failurePolicy != "Fail" || w.svcName == "" || !inv.ServicesKnown {
				continue
			}
			if p, down := backendProblem(inv, services, w.svcNamespace+"/"+w.svcName); p != "" && down.Since.After(created) {
				consider(down.Since.Add(th.WebhookBackend))
			}
		}
	}
	return next
}
