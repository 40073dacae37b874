package snapshot

import (
	"bytes"
	"time"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/syncmedic/syncmedic/flux"
)

// usedKinds are the kinds Observe reads every object of.
var usedKinds = map[schema.GroupKind]bool{
	gkApplication: true, gkAppSet: true, gkWorkflow: true, gkHelmRelease: true, gkService: true, gkEndpoints: true,
	gkEndpointSlice: true, gkValidating: true, gkMutating: true,
	gkKustomization: true, gkGitRepository: true, gkOCIRepository: true, gkBucket: true,
	gkNamespace: true, // the webhook rules say whether a backend's or owner's Namespace is gone or Terminating
}

// Deployments Observe reads (imageTag), by name.
const (
	argocdServerDeployment   = "argocd-server"
	helmControllerDeployment = "helm-controller"
)

// keep reports whether a rule reads u: every object of a used kind, the Flux CRD, the two Deployments that give
// the versions, the workloads kustomize-controller applied (their readiness), the Pods that are not Ready (what
// dates a webhook backend's outage), and any other object that is terminating (kube/stuck-terminating) or is a hook
// (the Argo CD hook rules). Observe reads nothing else, so dropping the rest changes no finding.
func keep(u *unstructured.Unstructured) bool {
	gk := u.GroupVersionKind().GroupKind()
	switch {
	case usedKinds[gk]:
		return true
	case gk == gkCRD:
		if u.GetName() == flux.CRDName {
			return true
		}
	case gk == gkSecret:
		if isHelmStorage(u) { // flux/helmrelease-ready-unknown's evidence; no other Secret is kept
			return true
		}
	case gk == gkDeployment:
		if n := u.GetName(); n == argocdServerDeployment || n == helmControllerDeployment {
			return true
		}
	case gk == gkEvent:
		if kind, _, _ := unstructured.NestedString(u.Object, "involvedObject", "kind"); kind == flux.KustomizationKind {
			return true // flux/kustomization-deletion-stuck's evidence
		}
	case gk == gkPod:
		if podReadyStatus(u) != "True" {
			return true // kube/webhook-backend-missing dates a Service without ready endpoints from such Pods
		}
	}
	if workloadKinds[gk] && isKustomizationApplied(u) {
		return true // flux/kustomization-health-check-stuck names the workload that holds the check
	}
	return u.GetDeletionTimestamp() != nil || isHook(u)
}

// workloadKinds are the kinds a Kustomization's health check judges (flux.HealthRefs).
var workloadKinds = map[schema.GroupKind]bool{gkDeployment: true, gkStatefulSet: true, gkDaemonSet: true, gkJob: true}

// isKustomizationApplied reports whether kustomize-controller applied u: it labels every object it applies with
// the Kustomization's name.
func isKustomizationApplied(u *unstructured.Unstructured) bool {
	md, _ := u.Object["metadata"].(map[string]interface{})
	l, _ := md["labels"].(map[string]interface{})
	_, ok := l[flux.KustomizationNameLabel].(string)
	return ok
}

// isHook is argocd.IsHook without its copy of the annotations: true when an annotation names the object a hook
// and every annotation is a string (else GetAnnotations, which IsHook reads, gives none).
func isHook(u *unstructured.Unstructured) bool {
	md, _ := u.Object["metadata"].(map[string]interface{})
	a, _ := md["annotations"].(map[string]interface{})
	_, argo := a[synccommon.AnnotationKeyHook]
	_, helm := a[helmHookAnnotation]
	if !argo && !helm {
		return false
	}
	for _, v := range a {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return true
}

// mayKeep reports whether an object of kind gk whose text (YAML or JSON) is raw may be kept: false only when keep
// would surely say no, judged from the text without decoding it. It looks for the words keep's tests depend on;
// escape sequences (which could spell them otherwise) and YAML aliases (which could bring them from elsewhere)
// make it say true.
func mayKeep(gk schema.GroupKind, raw []byte) bool {
	if usedKinds[gk] {
		return true
	}
	for _, w := range mayKeepWords {
		if bytes.Contains(raw, w) {
			return true
		}
	}
	if workloadKinds[gk] && bytes.Contains(raw, []byte(flux.KustomizationNameLabel)) {
		return true
	}
	switch gk {
	case gkPod: // keep reads a Pod whose Ready condition is absent, False or Unknown
		return !bytes.Contains(raw, []byte("Ready")) || bytes.Contains(raw, []byte("False")) ||
			bytes.Contains(raw, []byte("false")) || bytes.Contains(raw, []byte("FALSE")) || bytes.Contains(raw, []byte("Unknown"))
	case gkCRD:
		return bytes.Contains(raw, []byte(flux.CRDName))
	case gkSecret:
		return bytes.Contains(raw, []byte(flux.HelmStorageSecretType))
	case gkDeployment:
		return bytes.Contains(raw, []byte(argocdServerDeployment)) || bytes.Contains(raw, []byte(helmControllerDeployment))
	case gkEvent:
		return bytes.Contains(raw, []byte(flux.KustomizationKind))
	}
	return false
}

var mayKeepWords = [][]byte{
	[]byte("deletionTimestamp"), []byte(synccommon.AnnotationKeyHook), []byte(helmHookAnnotation),
	[]byte(`\u`), []byte(`\U`), []byte(`\x`),
	[]byte(" *"), []byte("[*"), []byte("{*"), []byte(",*"),
}

// helmHookAnnotation makes an object a hook for Argo CD as for Helm (argocd.IsHook).
const helmHookAnnotation = "helm.sh/hook"

// lastApplied is the annotation `kubectl apply` writes: a copy of the whole object that no rule reads.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// isHelmStorage reports whether u is one of Helm's release Secrets.
func isHelmStorage(u *unstructured.Unstructured) bool {
	t, _ := u.Object["type"].(string)
	return t == flux.HelmStorageSecretType
}

// trim drops what no rule reads from a kept object: kubectl's last-applied copy and its managed fields, but for
// an EndpointSlice's or Endpoints' newest entry's time (kube.LastWrite dates a webhook backend's outage from it);
// and of a Pod that is neither terminating nor a hook, everything but what dates a webhook backend (podReadiness).
func trim(u *unstructured.Unstructured) {
	md, ok := u.Object["metadata"].(map[string]interface{})
	if !ok {
		return
	}
	gk := u.GroupVersionKind().GroupKind()
	if last := newestManagedEntry(md); last != nil && (gk == gkEndpointSlice || gk == gkEndpoints) {
		md["managedFields"] = []interface{}{last}
	} else {
		delete(md, "managedFields")
	}
	if a, ok := md["annotations"].(map[string]interface{}); ok {
		delete(a, lastApplied)
	}
	if gk == gkPod && u.GetDeletionTimestamp() == nil && !isHook(u) {
		podReadiness(u)
	}
}

// newestManagedEntry is the manager, operation and time of md's newest managedFields entry (nil without one).
func newestManagedEntry(md map[string]interface{}) map[string]interface{} {
	entries, _ := md["managedFields"].([]interface{})
	var last map[string]interface{}
	var lastAt time.Time
	for _, e := range entries {
		m, _ := e.(map[string]interface{})
		s, _ := m["time"].(string)
		at, err := time.Parse(time.RFC3339, s)
		if err != nil || (last != nil && !at.After(lastAt)) {
			continue
		}
		last, lastAt = map[string]interface{}{"time": s}, at
		for _, k := range []string{"manager", "operation", "apiVersion"} {
			if v, ok := m[k]; ok {
				last[k] = v
			}
		}
	}
	return last
}

// podReadyStatus is the status of Pod u's Ready condition ("" without one).
func podReadyStatus(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]interface{}); m["type"] == "Ready" {
			status, _ := m["status"].(string)
			return status
		}
	}
	return ""
}

// podReadiness cuts Pod u down to what kube/webhook-backend-missing reads: its identity, labels, creation and its
// Ready condition (a dump's Pods are most of its bytes).
func podReadiness(u *unstructured.Unstructured) {
	md, _ := u.Object["metadata"].(map[string]interface{})
	keptMD := map[string]interface{}{}
	for _, k := range []string{"name", "namespace", "uid", "labels", "creationTimestamp"} {
		if v, ok := md[k]; ok {
			keptMD[k] = v
		}
	}
	kept := map[string]interface{}{"apiVersion": u.Object["apiVersion"], "kind": u.Object["kind"], "metadata": keptMD}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]interface{}); m["type"] == "Ready" {
			kept["status"] = map[string]interface{}{"conditions": []interface{}{m}}
		}
	}
	u.Object = kept
}
