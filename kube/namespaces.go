package kube

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// namespaceState is what a source saw of one Namespace.
type namespaceState int

const (
	// namespaceNotRead: the source did not list Namespaces, so nothing is claimed about it.
	namespaceNotRead namespaceState = iota
	namespaceActive
	namespaceTerminating
	namespaceGone
)

// namespaceOf says what inv shows of Namespace name: not read (Namespaces not listed), active, Terminating (namespaceDeleted dates
// it), or gone. A Namespace of that name whose uid differs from uid (when both are known) counts as
// gone: the one the caller refers to was deleted and another made in its place, as the garbage collector judges an
// owner reference. The text says so in words, for evidence ("" when not read).
func namespaceOf(inv Inventory, name, uid string) (namespaceState, string) {
	if !inv.NamespacesKnown {
		return namespaceNotRead, ""
	}
	for _, ns := range inv.Namespaces {
		if ns.GetName() != name {
			continue
		}
		if uid != "" && ns.GetUID() != "" && string(ns.GetUID()) != uid {
			return namespaceGone, "Namespace " + name + " (uid " + uid + ") is gone; the Namespace of that name now is another one (uid " + string(ns.GetUID()) + ")"
		}
		if d := ns.GetDeletionTimestamp(); d != nil || namespacePhase(ns) == "Terminating" {
			return namespaceTerminating, "Namespace " + name + " is Terminating"
		}
		return namespaceActive, "Namespace " + name + " exists (" + phaseOrActive(ns) + ")"
	}
	return namespaceGone, "Namespace " + name + " does not exist"
}

// namespaceDeleted is when Namespace name began terminating, or nil (not Terminating, gone, or not read).
func namespaceDeleted(inv Inventory, name string) *time.Time {
	for _, ns := range inv.Namespaces {
		if ns.GetName() == name && ns.GetDeletionTimestamp() != nil {
			t := ns.GetDeletionTimestamp().Time
			return &t
		}
	}
	return nil
}

func namespacePhase(ns *unstructured.Unstructured) string {
	p, _, _ := unstructured.NestedString(ns.Object, "status", "phase")
	return p
}

func phaseOrActive(ns *unstructured.Unstructured) string {
	if p := namespacePhase(ns); p != "" {
		return p
	}
	return "Active"
}
