package kube

import (
	"fmt"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// webhook is one entry of a Validating- or MutatingWebhookConfiguration.
type webhook struct {
	config        *unstructured.Unstructured
	name          string
	failurePolicy string
	svcNamespace  string
	svcName       string
}

func webhooks(cfg *unstructured.Unstructured) []webhook {
	list, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	var out []webhook
	for _, item := range list {
		m, ok := item.(map[string]interface{})
		if !ok {
			continue
		}
		w := webhook{config: cfg}
		w.name, _, _ = unstructured.NestedString(m, "name")
		w.failurePolicy, _, _ = unstructured.NestedString(m, "failurePolicy")
		if w.failurePolicy == "" {
			w.failurePolicy = "Fail" // the admissionregistration.k8s.io/v1 default
		}
		w.svcNamespace, _, _ = unstructured.NestedString(m, "clientConfig", "service", "namespace")
		w.svcName, _, _ = unstructured.NestedString(m, "clientConfig", "service", "name")
		out = append(out, w)
	}
	return out
}

// WebhookBackendMissing reports webhook configurations with failurePolicy Fail whose Service is gone or has no ready
// endpoints — only when the source listed Services (and endpoints) at all — and webhook call failures reported by
// the tools ("failed calling webhook").
func WebhookBackendMissing(inv Inventory, now time.Time, th Thresholds) []syncmedic.Finding {
	services := index(inv.Services)
	var out []syncmedic.Finding
	reported := map[string]int{} // webhook name -> index in out
	for _, cfg := range inv.WebhookConfigurations {
		if cfg.GetDeletionTimestamp() != nil || now.Sub(cfg.GetCreationTimestamp().Time) < th.WebhookBackend {
			continue
		}
		for _, w := range webhooks(cfg) {
			if w.failurePolicy != "Fail" || w.svcName == "" || !inv.ServicesKnown {
				continue
			}
			svcKey := w.svcNamespace + "/" + w.svcName
			var problem string
			if _, ok := services[svcKey]; !ok {
				problem = "Service " + svcKey + " does not exist"
			} else if inv.EndpointsKnown && !hasReadyEndpoints(inv, w.svcNamespace, w.svcName) {
				problem = "Service " + svcKey + " has no ready endpoints"
			} else {
				continue
			}
			where := w.name
			if w.name != cfg.GetName() {
				where += " (" + cfg.GetKind() + " " + cfg.GetName() + ")"
			}
			f := syncmedic.NewFinding(syncmedic.RuleWebhookBackendMissing, objectRef(cfg),
				fmt.Sprintf("Webhook %s rejects every write it matches: %s and failurePolicy is Fail", where, problem))
			f.Evidence = []syncmedic.Evidence{
				{Field: "webhooks[" + w.name + "].failurePolicy", Value: w.failurePolicy},
				{Field: "webhooks[" + w.name + "].clientConfig.service", Value: svcKey},
				{Field: "backend", Value: problem},
			}
			f.Remedy = webhookRemedy(cfg, w)
			reported[w.name] = len(out)
			out = append(out, f)
		}
	}
	for _, fail := range inv.WebhookCallFailures {
		name := failedWebhookName(fail.Message)
		ev := syncmedic.Evidence{Field: fail.Source, Value: fail.Message}
		if !fail.At.IsZero() {
			at := fail.At
			ev.Since = &at
		}
		if i, ok := reported[name]; ok {
			out[i].Evidence = append(out[i].Evidence, ev)
			continue
		}
		ref := syncmedic.ObjectRef{Tool: syncmedic.ToolKubernetes, Group: "admissionregistration.k8s.io", Kind: "Webhook", Name: name}
		var cfgFound *unstructured.Unstructured
		var hook webhook
		for _, cfg := range inv.WebhookConfigurations {
			for _, w := range webhooks(cfg) {
				if w.name == name {
					cfgFound, hook = cfg, w
				}
			}
		}
		if cfgFound != nil {
			ref = objectRef(cfgFound)
		}
		f := syncmedic.NewFinding(syncmedic.RuleWebhookBackendMissing, ref,
			fmt.Sprintf("Admission webhook %q failed for %s: writes it matches are rejected", name, fail.Source))
		f.Since = fail.At
		f.Evidence = []syncmedic.Evidence{ev}
		if cfgFound != nil {
			f.Remedy = webhookRemedy(cfgFound, hook)
		} else {
			f.Remedy = syncmedic.Remedy{
				Description: "Find the webhook configuration that declares this webhook and restore its backend, or make it fail open.",
				Commands:    []string{"kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations -o custom-columns=NAME:.metadata.name,WEBHOOKS:.webhooks[*].name"},
			}
		}
		reported[name] = len(out)
		out = append(out, f)
	}
	return out
}

var failedCallRe = regexp.MustCompile(`failed calling webhook "([^"]+)"`)

func failedWebhookName(msg string) string {
	if m := failedCallRe.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	return "unknown"
}

func webhookRemedy(cfg *unstructured.Unstructured, w webhook) syncmedic.Remedy {
	res := resourceArg(cfg)
	idx := 0
	for i, x := range webhooks(cfg) {
		if x.name == w.name {
			idx = i
		}
	}
	return syncmedic.Remedy{
		Description: "Choose one: restore the webhook's Service (re-sync the app that owns it), make the webhook fail open while you do, or delete the configuration if its component was uninstalled.",
		Commands: []string{
			fmt.Sprintf("kubectl -n %s get service,endpointslices -l kubernetes.io/service-name=%s   # is the backend really gone?", w.svcNamespace, w.svcName),
			fmt.Sprintf(`kubectl patch %s %s --type json -p '[{"op":"replace","path":"/webhooks/%d/failurePolicy","value":"Ignore"}]'`, res, cfg.GetName(), idx),
			fmt.Sprintf("kubectl delete %s %s   # only if the component that served it was uninstalled", res, cfg.GetName()),
		},
	}
}

func index(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := make(map[string]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		m[o.GetNamespace()+"/"+o.GetName()] = o
	}
	return m
}

func hasReadyEndpoints(inv Inventory, ns, svc string) bool {
	for _, s := range inv.EndpointSlices {
		if s.GetNamespace() != ns || s.GetLabels()["kubernetes.io/service-name"] != svc {
			continue
		}
		eps, _, _ := unstructured.NestedSlice(s.Object, "endpoints")
		for _, e := range eps {
			m, _ := e.(map[string]interface{})
			ready, found, _ := unstructured.NestedBool(m, "conditions", "ready")
			if !found || ready {
				return true
			}
		}
	}
	for _, e := range inv.Endpoints {
		if e.GetNamespace() != ns || e.GetName() != svc {
			continue
		}
		subsets, _, _ := unstructured.NestedSlice(e.Object, "subsets")
		for _, s := range subsets {
			m, _ := s.(map[string]interface{})
			if addrs, _, _ := unstructured.NestedSlice(m, "addresses"); len(addrs) > 0 {
				return true
			}
		}
	}
	return false
}

// WebhookNamespaceOwned reports webhook configurations with a controller ownerReference to a Namespace (Knative
// ≤1.15): Argo CD does not prune them, so deleting the app leaves the webhook behind without its backend.
func WebhookNamespaceOwned(inv Inventory, now time.Time, th Thresholds) []syncmedic.Finding {
	var out []syncmedic.Finding
	for _, cfg := range inv.WebhookConfigurations {
		for _, ref := range cfg.GetOwnerReferences() {
			if ref.Kind != "Namespace" || ref.APIVersion != "v1" || ref.Controller == nil || !*ref.Controller {
				continue
			}
			f := syncmedic.NewFinding(syncmedic.RuleWebhookNamespaceOwned, objectRef(cfg),
				fmt.Sprintf("%s %s is controlled by Namespace %s: Argo CD will not prune it, so uninstalling the app leaves a webhook without a backend", cfg.GetKind(), cfg.GetName(), ref.Name))
			f.Since = cfg.GetCreationTimestamp().Time
			f.Evidence = []syncmedic.Evidence{
				{Field: "metadata.ownerReferences", Value: fmt.Sprintf("Namespace/%s (uid %s, controller: true)", ref.Name, ref.UID)},
			}
			for _, w := range webhooks(cfg) {
				f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "webhooks[" + w.name + "]", Value: fmt.Sprintf("failurePolicy %s, service %s/%s", w.failurePolicy, w.svcNamespace, w.svcName)})
			}
			f.Remedy = syncmedic.Remedy{
				Description: "For Knative ≥1.16 set WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP=true on the webhook Deployment (knative/pkg #3106, #3108; the syncmedic CMP can inject it with fix=knative-ownership); it does not strip owner references already present, so remove this one once (knative/serving #15483). Knative ≥1.20 writes a non-controller reference (knative/pkg #3255).",
				Commands: []string{
					fmt.Sprintf("kubectl -n %s set env deployment/webhook WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP=true", ref.Name),
					fmt.Sprintf(`kubectl patch %s %s --type json -p '[{"op":"remove","path":"/metadata/ownerReferences"}]'`, resourceArg(cfg), cfg.GetName()),
				},
			}
			out = append(out, f)
		}
	}
	return out
}
