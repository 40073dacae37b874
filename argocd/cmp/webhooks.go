package cmp

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// KnativeOwnershipEnv is the Knative webhook setting (knative.dev/pkg release-1.16+, #3106 and #3108) that stops the
// webhook from making its configurations controlled by the system Namespace.
const KnativeOwnershipEnv = "WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP"

func isWebhookConfiguration(obj *unstructured.Unstructured) bool {
	k := obj.GetKind()
	return apiGroup(obj) == "admissionregistration.k8s.io" &&
		(k == "ValidatingWebhookConfiguration" || k == "MutatingWebhookConfiguration")
}

func lintWebhookConfiguration(obj *unstructured.Unstructured, o LintOptions, services map[string]bool) []Hazard {
	var out []Hazard
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "Namespace" && ref.APIVersion == "v1" && ref.Controller != nil && *ref.Controller {
			out = append(out, Hazard{
				ID: HazardWebhookNamespaceOwned,
				Message: fmt.Sprintf("webhook configuration is controlled by Namespace %s (ownerReferences controller: true): "+
					"Argo CD does not prune it, so deleting the app leaves the webhook without its backend", ref.Name),
				Fix: "remove the Namespace owner reference from the manifest; for Knative ≥1.16 set " + KnativeOwnershipEnv +
					"=true on the webhook Deployment so it is not added back",
			})
		}
	}
	list, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
	for _, item := range list {
		m, ok := item.(map[string]interface{})
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "name")
		policy, _, _ := unstructured.NestedString(m, "failurePolicy")
		if policy == "" {
			policy = "Fail" // the admissionregistration.k8s.io/v1 default
		}
		svcNS, _, _ := unstructured.NestedString(m, "clientConfig", "service", "namespace")
		svcName, _, _ := unstructured.NestedString(m, "clientConfig", "service", "name")
		key := nsOr(svcNS, o.AppNamespace) + "/" + svcName
		if policy != "Fail" || svcName == "" || !services[key] {
			continue
		}
		out = append(out, Hazard{
			ID: HazardWebhookFailSameApp,
			Message: fmt.Sprintf("webhook %s has failurePolicy Fail and is served by Service %s of the same app: deleting the "+
				"app removes the Service while the webhook still matches, and every write it matches (the finalizer "+
				"removals the deletion waits for included) is rejected until someone deletes the configuration by hand", name, key),
			Fix: "set failurePolicy: Ignore, or exclude the app's own namespace with a namespaceSelector, or deploy the " +
				"webhook configuration in a separate Application that is deleted first",
		})
	}
	return out
}

// lintKnativeWebhook reports a Knative webhook Deployment that will make its webhook configurations controlled by
// the Namespace (Knative ≤1.19 does so unless WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP=true).
func lintKnativeWebhook(obj *unstructured.Unstructured) []Hazard {
	i, c := knativeWebhookContainer(obj)
	if i < 0 {
		return nil
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range env {
		m, _ := e.(map[string]interface{})
		if m["name"] == KnativeOwnershipEnv {
			if v, _ := m["value"].(string); strings.EqualFold(v, "true") {
				return nil
			}
		}
	}
	return []Hazard{{
		ID: HazardWebhookNamespaceOwned,
		Message: "Knative webhook Deployment without " + KnativeOwnershipEnv + "=true: at runtime it makes its webhook " +
			"configurations controlled by the Namespace, which Argo CD then never prunes; deleting the app leaves " +
			"failurePolicy Fail webhooks without a backend (knative/serving #15483)",
		Fix: "set env " + KnativeOwnershipEnv + "=true on the webhook container (Knative ≥1.16; parameter " +
			"fix=knative-ownership adds it), then remove the owner references already present once",
		AutoFix: FixKnativeOwnership,
	}}
}

// knativeWebhookContainer returns the index and the container of a Knative webhook image, or -1.
func knativeWebhookContainer(obj *unstructured.Unstructured) (int, map[string]interface{}) {
	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	for i, c := range containers {
		m, _ := c.(map[string]interface{})
		image, _ := m["image"].(string)
		if strings.Contains(image, "knative.dev/") && strings.Contains(image, "/cmd/webhook") {
			return i, m
		}
	}
	return -1, nil
}
