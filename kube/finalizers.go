package kube

import "strings"

// knownFinalizers explains finalizers SREs meet on stuck objects: who is supposed to remove each, and what to check.
var knownFinalizers = map[string]string{
	"argocd.argoproj.io/hook-finalizer":          "Argo CD hook finalizer: removed by the Argo CD application controller when the hook finishes; v2.14.3 adds it by accident and no 2.x release removes it (argo-cd #21901, #22142); v3.x leaks it on some paths (#23226, #24187). See rule argocd/hook-finalizer-stuck.",
	"resources-finalizer.argocd.argoproj.io":     "Argo CD cascade-delete finalizer on an Application: removed once every managed resource is deleted; look for a managed resource that cannot be deleted.",
	"post-delete-finalizer.argocd.argoproj.io":   "Argo CD post-delete hook finalizer: removed when the app's PostDelete hooks succeed; check the hook Jobs.",
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
	owner := name
	if i := strings.Index(name, "/"); i > 0 {
		owner = name[:i]
	}
	return "Unknown finalizer: the controller that added it (domain " + owner + ") must remove it; check that it runs and look at its logs.", false
}
