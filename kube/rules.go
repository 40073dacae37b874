package kube

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// Evaluate runs every cluster rule of the catalog (webhooks, stuck terminating, Argo Workflows) over inv. An object
// a specific rule explains is not reported again by kube/stuck-terminating.
func Evaluate(inv Inventory, now time.Time, th Thresholds) []syncmedic.Finding {
	var out []syncmedic.Finding
	out = append(out, WebhookBackendMissing(inv, now, th)...)
	out = append(out, WebhookNamespaceOwned(inv, now, th)...)
	out = append(out, ArtifactGCFinalizerStuck(inv, now, th)...)
	out = append(out, StuckTerminating(inv, now, th)...)
	return syncmedic.DropShadowed(out)
}

// StuckTerminating reports objects whose deletionTimestamp is older than the threshold while finalizers are left,
// explaining each known finalizer. When the argocd rules run (Inventory.ArgoCDRulesRun), a finalizer an argocd rule
// judges (argoCDRuleFor) holds nothing here: an object held only by such finalizers is left to that rule, and one
// held by others too is reported for the others.
func StuckTerminating(inv Inventory, now time.Time, th Thresholds) []syncmedic.Finding {
	var out []syncmedic.Finding
	seen := map[string]bool{}
	all := append(append([]*unstructured.Unstructured{}, inv.Objects...), inv.Workflows...)
	all = append(all, inv.WebhookConfigurations...)
	for _, o := range all {
		dt := o.GetDeletionTimestamp()
		if dt == nil || now.Sub(dt.Time) < th.Terminating {
			continue
		}
		var holding []string
		for _, fin := range o.GetFinalizers() {
			if !inv.ArgoCDRulesRun || argoCDRuleFor(o, fin) == "" {
				holding = append(holding, fin)
			}
		}
		if len(holding) == 0 {
			continue
		}
		ref := objectRef(o)
		if key := ref.String(); seen[key] {
			continue
		} else {
			seen[key] = true
		}
		f := syncmedic.NewFinding(syncmedic.RuleStuckTerminating, ref,
			fmt.Sprintf("%s %s has been terminating for %s, held by %s", o.GetKind(), nsName(o), syncmedic.HumanDuration(now.Sub(dt.Time)), strings.Join(holding, ", ")))
		f.Since = dt.Time
		t := dt.Time
		f.Evidence = []syncmedic.Evidence{
			{Field: "metadata.deletionTimestamp", Value: t.UTC().Format(time.RFC3339), Since: &t},
			{Field: "metadata.finalizers", Value: "[" + strings.Join(o.GetFinalizers(), ", ") + "]"},
		}
		for _, fin := range o.GetFinalizers() {
			why, _ := ExplainFinalizer(fin)
			if rule := argoCDRuleFor(o, fin); rule != "" && inv.ArgoCDRulesRun {
				why = "judged by " + string(rule) + ", not by this rule: " + why
			}
			f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "finalizer " + fin, Value: why})
		}
		f.Remedy = syncmedic.Remedy{
			Description: "Find out why the controller named by each finalizer has not removed it (explanations above) and fix that; remove a finalizer by hand only when its controller is gone for good, since it skips that controller's cleanup.",
			Commands: []string{
				fmt.Sprintf("kubectl get %s %s -o yaml", resourceArg(o), nsFlagName(o)),
				fmt.Sprintf("kubectl get events %s --field-selector involvedObject.name=%s", nsFlag(o), o.GetName()),
			},
		}
		out = append(out, f)
	}
	return out
}

func objectRef(o *unstructured.Unstructured) syncmedic.ObjectRef {
	gvk := o.GroupVersionKind()
	ref := syncmedic.ObjectRef{Tool: syncmedic.ToolKubernetes, Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind,
		Namespace: o.GetNamespace(), Name: o.GetName(), UID: string(o.GetUID())}
	if gvk.Group == "argoproj.io" && gvk.Kind == "Workflow" {
		ref.Tool = syncmedic.ToolArgoWorkflows
	}
	ref.App = ArgoCDApp(o)
	return ref
}

// ArgoCDApp returns the Argo CD application that manages o, from its tracking annotation
// (argocd.argoproj.io/tracking-id "app:group/kind:ns/name") or the default tracking label
// (app.kubernetes.io/instance); "" when o is not tracked.
func ArgoCDApp(o *unstructured.Unstructured) string {
	if id := o.GetAnnotations()["argocd.argoproj.io/tracking-id"]; id != "" {
		if i := strings.Index(id, ":"); i > 0 {
			app := id[:i]
			if j := strings.LastIndex(app, "_"); j >= 0 { // "<app-namespace>_<app>" for apps in any namespace
				return app[j+1:]
			}
			return app
		}
	}
	return o.GetLabels()["app.kubernetes.io/instance"]
}

func nsName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

func resourceArg(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	r := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		r += "." + gvk.Group
	}
	return r
}

func nsFlag(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return ""
	}
	return "-n " + o.GetNamespace()
}

func nsFlagName(o *unstructured.Unstructured) string {
	return strings.TrimSpace(o.GetName() + " " + nsFlag(o))
}
