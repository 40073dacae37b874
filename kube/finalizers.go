package kube

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// knownFinalizers explains finalizers SREs meet on stuck objects: who is supposed to remove each, and what to check.
var knownFinalizers = map[string]string{
	"argocd.argoproj.io/hook-finalizer":          "Argo CD hook finalizer: removed by the Argo CD application controller when the hook finishes; v2.14.3 adds it by accident and no 2.x release removes it (argo-cd #21901, #22142); v3.x leaks it on some paths (#23226, #24187). See rule argocd/hook-finalizer-stuck.",
	"resources-finalizer.argocd.argoproj.io":     "Argo CD cascade-delete finalizer on an Application: removed once every managed resource is deleted; look for a managed resource that cannot be deleted.",
	"post-delete-finalizer.argocd.argoproj.io":   "Argo CD post-delete hook finalizer: removed when the app's PostDelete hooks succeed; check the hook Jobs.",
	"pre-delete-finalizer.argocd.argoproj.io":    "Argo CD pre-delete hook finalizer (v3.6): removed when the app's PreDelete hooks succeed; check the hook Jobs.",
	"workflows.argoproj.io/artifact-gc":          "Argo Workflows artifact GC: removed when the artifact GC Pods succeed; a failed Workflow with no artifacts keeps it (argo-workflows #13499, fixed in v3.5.11/v3.6.0). See rule workflows/artifactgc-finalizer-stuck.",
	"workflows.argoproj.io/status":               "Argo Workflows status finalizer: removed by the workflow controller once the status is recorded; check that the controller runs.",
	"kubernetes.io/pvc-protection":               "PVC protection: removed when no Pod uses the claim any more; find the Pod that still mounts it.",
	"kubernetes.io/pv-protection":                "PV protection: removed when the volume is no longer bound to a claim.",
	"foregroundDeletion":                         "Foreground cascading deletion: removed when every dependent with blockOwnerDeletion is gone; look for a dependent that is itself stuck.",
	"orphan":                                     "Orphan deletion: removed by the garbage collector after dependents' ownerReferences are cleared; check kube-controller-manager.",
	"batch.kubernetes.io/job-tracking":           "Job tracking finalizer on a Job's Pod: removed by the Job controller once it accounted for the Pod; check kube-controller-manager.",
	"finalizers.fluxcd.io":                       "Flux finalizer: removed by the owning Flux controller after it garbage-collects what the object applied; check that the controller runs and can reach the source.",
	"kubernetes":                                 "Namespace finalizer: removed when every object in the namespace is deleted; look for objects with finalizers and unavailable API services.",
	"external-secrets.io/externalsecret-cleanup": "External Secrets cleanup finalizer: removed by the external-secrets controller.",
}

// ExplainFinalizer returns the catalog's explanation of a finalizer, or a generic hint for an unknown one.
func ExplainFinalizer(name string) (string, bool) {
	if s, ok := knownFinalizers[name]; ok {
		return s, true
	}
	// Argo CD writes its Application finalizers with a suffix: "resources-finalizer.argocd.argoproj.io/foreground",
	// "pre-delete-finalizer.argocd.argoproj.io/cleanup".
	if base, _, ok := strings.Cut(name, "/"); ok && strings.HasSuffix(base, ".argocd.argoproj.io") {
		if s, ok := knownFinalizers[base]; ok {
			return s, true
		}
	}
	owner := name
	if i := strings.Index(name, "/"); i > 0 {
		owner = name[:i]
	}
	return "Unknown finalizer: the controller that added it (domain " + owner + ") must remove it; check that it runs and look at its logs.", false
}

// Argo CD's finalizers that an argocd rule judges, and the annotations that make an object an Argo CD hook (Argo CD's
// own, or Helm's, which Argo CD maps to hooks).
const (
	argoCDHookFinalizer       = "argocd.argoproj.io/hook-finalizer"
	argoCDHookAnnotation      = "argocd.argoproj.io/hook"
	helmHookAnnotation        = "helm.sh/hook"
	argoCDResourcesFinalizer  = "resources-finalizer.argocd.argoproj.io"
	argoCDPreDeleteFinalizer  = "pre-delete-finalizer.argocd.argoproj.io"
	argoCDPostDeleteFinalizer = "post-delete-finalizer.argocd.argoproj.io"
)

// argoCDRuleFor names the argocd rule that judges finalizer fin on o, or "" when none does: the hook finalizer on an
// Argo CD hook is argocd/hook-finalizer-stuck's (a deleted hook held by it while its v3 wave still runs another hook
// is normal, and only that rule knows the operation), and the resources, pre-delete and post-delete finalizers of an
// Application (with their "/foreground", "/background" or "/cleanup" suffixes) are argocd/app-deletion-stuck's. A
// finalizer an argocd rule owns is that rule's to judge: kube/stuck-terminating does not report it.
func argoCDRuleFor(o *unstructured.Unstructured, fin string) syncmedic.RuleID {
	gvk := o.GroupVersionKind()
	switch {
	case fin == argoCDHookFinalizer && isArgoCDHook(o):
		return syncmedic.RuleHookFinalizerStuck
	case gvk.Group == "argoproj.io" && gvk.Kind == "Application" && (strings.HasPrefix(fin, argoCDResourcesFinalizer) ||
		strings.HasPrefix(fin, argoCDPreDeleteFinalizer) || strings.HasPrefix(fin, argoCDPostDeleteFinalizer)):
		return syncmedic.RuleAppDeletionStuck
	}
	return ""
}

func isArgoCDHook(o *unstructured.Unstructured) bool {
	a := o.GetAnnotations()
	_, argo := a[argoCDHookAnnotation]
	_, helm := a[helmHookAnnotation]
	return argo || helm
}
