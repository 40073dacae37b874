package kube

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

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
// endpoints — only when the source listed Services (and endpoints) at all — for longer than the threshold, counted
// from when the backend went down (BackendDownSince, else the Service's and EndpointSlices' own timestamps), never
// from the configuration's age alone: an old webhook whose endpoints are briefly unready during a rollout is not
// reported. Webhook call failures reported by the tools ("failed calling webhook") are reported too.
func WebhookBackendMissing(inv Inventory, now time.Time, th Thresholds) []syncmedic.Finding {
	services := index(inv.Services)
	firstFailure := map[string]WebhookCallFailure{} // webhook name -> its earliest dated failed call
	for _, fail := range inv.WebhookCallFailures {
		name := failedWebhookName(fail.Message)
		if prev, ok := firstFailure[name]; !fail.At.IsZero() && (!ok || fail.At.Before(prev.At)) {
			firstFailure[name] = fail
		}
	}
	var out []syncmedic.Finding
	reported := map[string]int{} // webhook name -> index in out
	for _, cfg := range inv.WebhookConfigurations {
		if cfg.GetDeletionTimestamp() != nil {
			continue
		}
		for _, w := range webhooks(cfg) {
			if w.failurePolicy != "Fail" || w.svcName == "" || !inv.ServicesKnown {
				continue
			}
			svcKey := w.svcNamespace + "/" + w.svcName
			problem, down := backendProblem(inv, services, svcKey)
			if problem == "" {
				continue
			}
			// A configuration installed before its backend gets the same grace. A missing Service in a dump does
			// not say when it went: the configuration's creation is then the earliest the problem can have begun,
			// and the finding is dated from it and says so.
			from := down
			if created := cfg.GetCreationTimestamp().Time; created.After(from.Since) {
				from = BackendDown{Since: created, Evidence: cfg.GetKind() + " " + cfg.GetName() + " created (after the backend went down)"}
			}
			if now.Sub(from.Since) < th.WebhookBackend {
				continue
			}
			dated := "from " + from.Evidence
			if down.Since.IsZero() {
				dated = "unknown (a dump does not say when the Service went): dated from the webhook configuration's creation, the earliest it can have begun"
				if first, ok := firstFailure[w.name]; ok && first.At.After(from.Since) {
					from.Since, dated = first.At, "unknown (a dump does not say when the Service went): dated from the first failed call ("+first.Source+"), when it was down at the latest"
				}
			}
			since := from.Since
			where := w.name
			if w.name != cfg.GetName() {
				where += " (" + cfg.GetKind() + " " + cfg.GetName() + ")"
			}
			nsState, nsText := namespaceOf(inv, w.svcNamespace, "")
			nsGoing := nsState == namespaceTerminating || nsState == namespaceGone
			summary := problem + " and failurePolicy is Fail"
			if nsGoing {
				summary = problem + "; " + nsText + ", so the backend is gone with it; failurePolicy is Fail"
			}
			f := syncmedic.NewFinding(syncmedic.RuleWebhookBackendMissing, objectRef(cfg),
				fmt.Sprintf("Webhook %s rejects every write it matches: %s", where, summary))
			f.Since = since
			f.Evidence = []syncmedic.Evidence{
				{Field: "webhooks[" + w.name + "].failurePolicy", Value: w.failurePolicy},
				{Field: "webhooks[" + w.name + "].clientConfig.service", Value: svcKey},
				{Field: "backend", Value: problem, Since: timePtr(since)},
				{Field: "since", Value: since.UTC().Format(time.RFC3339) + ", " + dated, Since: timePtr(since)},
				namespaceEvidence(inv, w.svcNamespace, nsText),
			}
			f.Remedy = webhookRemedy(cfg, w, nsGoing)
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
			state, _ := namespaceOf(inv, hook.svcNamespace, "")
			f.Remedy = webhookRemedy(cfgFound, hook, state == namespaceTerminating || state == namespaceGone)
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

// webhookRemedy says how to unblock the writes webhook w of cfg rejects; nsGoing: the Service's Namespace is
// Terminating or gone, so the Service cannot be restored in it.
func webhookRemedy(cfg *unstructured.Unstructured, w webhook, nsGoing bool) syncmedic.Remedy {
	res := resourceArg(cfg)
	idx := 0
	for i, x := range webhooks(cfg) {
		if x.name == w.name {
			idx = i
		}
	}
	desc := "Choose one: restore the webhook's Service (re-sync the app that owns it), make the webhook fail open while you do, or delete the configuration if its component was uninstalled."
	check := fmt.Sprintf("kubectl -n %s get service,endpointslices -l kubernetes.io/service-name=%s   # is the backend really gone?", w.svcNamespace, w.svcName)
	if nsGoing {
		desc = "The Service's Namespace " + w.svcNamespace + " is gone or Terminating, so the Service cannot come back in it: delete the configuration if its component was uninstalled, or make the webhook fail open until the component is reinstalled."
		check = fmt.Sprintf("kubectl get namespace %s   # Terminating, or NotFound?", w.svcNamespace)
	}
	return syncmedic.Remedy{
		Description: desc,
		Commands: []string{
			check,
			fmt.Sprintf(`kubectl patch %s %s --type json -p '[{"op":"replace","path":"/webhooks/%d/failurePolicy","value":"Ignore"}]'`, res, cfg.GetName(), idx),
			fmt.Sprintf("kubectl delete %s %s   # only if the component that served it was uninstalled", res, cfg.GetName()),
		},
	}
}

// BackendDown is since when a webhook's backend has been missing or without ready endpoints, and what says so.
type BackendDown struct {
	// Since is the latest moment the evidence shows the backend still up (zero when nothing dates it: a Service
	// missing from a dump).
	Since time.Time
	// Evidence names where Since comes from, for the finding ("Pod apps/web-1: Ready condition False since …").
	Evidence string
}

// later is d, or o when o dates the outage later: the latest evidence that the backend was last up wins.
func (d BackendDown) later(o BackendDown) BackendDown {
	if o.Since.After(d.Since) {
		return o
	}
	return d
}

// backendProblem says what is wrong with the Service svcKey ("namespace/name") a webhook calls ("" when it has
// ready endpoints, or when endpoints were not listed) and since when: BackendDownSince when the source tracked it,
// else, for a Service without ready endpoints, the latest evidence that it was last up — its creation, its
// EndpointSlices' (or Endpoints') last change (lastChange) and its Pods' readiness (podLastReady); for a missing
// Service nothing (a dump cannot tell when it was deleted; the configuration's creation then dates it).
func backendProblem(inv Inventory, services map[string]*unstructured.Unstructured, svcKey string) (string, BackendDown) {
	ns, name, _ := strings.Cut(svcKey, "/")
	svc, ok := services[svcKey]
	var problem string
	var down BackendDown
	switch {
	case !ok:
		problem = "Service " + svcKey + " does not exist"
	case inv.EndpointsKnown && !hasReadyEndpoints(inv, ns, name):
		problem = "Service " + svcKey + " has no ready endpoints"
		down = BackendDown{Since: svc.GetCreationTimestamp().Time, Evidence: "Service " + svcKey + " created"}
		for _, group := range [][]*unstructured.Unstructured{inv.EndpointSlices, inv.Endpoints} {
			for _, e := range group {
				if e.GetNamespace() != ns || (e.GetName() != name && e.GetLabels()[discoveryServiceLabel] != name) {
					continue
				}
				down = down.later(lastChange(e))
			}
		}
		for _, p := range selectedPods(inv, svc) {
			down = down.later(podLastReady(p))
		}
	default:
		return "", BackendDown{}
	}
	if d, ok := inv.BackendDownSince[svcKey]; ok {
		down = d
	}
	return problem, down
}

// discoveryServiceLabel links an EndpointSlice to its Service.
const discoveryServiceLabel = "kubernetes.io/service-name"

// lastChange is when an EndpointSlice or Endpoints object last changed: the latest of its last write (the newest
// metadata.managedFields time, which a live source and the snapshot reader keep), the endpoints controller's
// endpoints.kubernetes.io/last-change-trigger-time annotation and its creation. The annotation alone is not enough:
// the controller deletes it when no Pod's Ready transition triggered the change — a rollout that deletes the only
// ready Pod — and sets it to the Service's creation after it restarts (k8s.io/endpointslice TriggerTimeTracker), so
// the creation of an old slice would date a backend that went down seconds ago from long ago. A slice that shows no
// ready endpoint has shown that since its last write, so the write dates the outage no earlier than it began.
func lastChange(o *unstructured.Unstructured) BackendDown {
	what := o.GetKind() + " " + nsName(o)
	at := BackendDown{Since: o.GetCreationTimestamp().Time, Evidence: what + " created"}
	if v := o.GetAnnotations()[corev1.EndpointsLastChangeTriggerTime]; v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			at = at.later(BackendDown{Since: t, Evidence: what + ": annotation " + corev1.EndpointsLastChangeTriggerTime + " (a Pod's last readiness change)"})
		}
	}
	return at.later(BackendDown{Since: LastWrite(o), Evidence: what + " last written (metadata.managedFields)"})
}

// selectedPods are the Pods of inv (a dump's; the live scanner does not watch Pods) that svc's selector picks.
func selectedPods(inv Inventory, svc *unstructured.Unstructured) []*unstructured.Unstructured {
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	if len(sel) == 0 {
		return nil // a Service without a selector has hand-written endpoints: no Pod says anything about it
	}
	var out []*unstructured.Unstructured
	for _, p := range inv.Pods {
		if p.GetNamespace() == svc.GetNamespace() && labels.SelectorFromSet(sel).Matches(labels.Set(p.GetLabels())) {
			out = append(out, p)
		}
	}
	return out
}

// podLastReady is the latest moment Pod p shows that the backend was up: for a Pod deleted while Ready, when its
// deletion was asked for (deletionTimestamp minus deletionGracePeriodSeconds: the endpoints controller takes a
// terminating Pod out of service then); else its Ready condition's last transition (a restarted container, a new
// Pod's first status); for a Pod without a Ready condition yet (not scheduled, or no status written), its creation,
// as the replacement of the Pod that was serving.
func podLastReady(p *unstructured.Unstructured) BackendDown {
	what := "Pod " + nsName(p)
	conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]interface{})
		if m["type"] != string(corev1.PodReady) {
			continue
		}
		status, _ := m["status"].(string)
		if dt := p.GetDeletionTimestamp(); dt != nil && status == string(corev1.ConditionTrue) {
			at := dt.Time
			if g := p.GetDeletionGracePeriodSeconds(); g != nil {
				at = at.Add(-time.Duration(*g) * time.Second)
			}
			return BackendDown{Since: at, Evidence: what + " deleted while Ready (metadata.deletionTimestamp − deletionGracePeriodSeconds)"}
		}
		s, _ := m["lastTransitionTime"].(string)
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return BackendDown{}
		}
		return BackendDown{Since: t, Evidence: what + ": Ready condition " + status + " since then (status.conditions lastTransitionTime)"}
	}
	return BackendDown{Since: p.GetCreationTimestamp().Time, Evidence: what + " created, not ready yet (no Ready condition)"}
}

// LastWrite is the newest time in o's metadata.managedFields: when a manager last changed it (zero without them).
func LastWrite(o *unstructured.Unstructured) time.Time {
	var at time.Time
	for _, e := range o.GetManagedFields() {
		if e.Time != nil && e.Time.After(at) {
			at = e.Time.Time
		}
	}
	return at
}

// BackendsDown returns the Services ("namespace/name") that webhooks with failurePolicy Fail call and that are
// missing or without ready endpoints in inv, with the evidence their own objects date the problem from (zero for a
// missing Service), and the Services such webhooks call that are up: what a live source tracks in
// Inventory.BackendDownSince.
func BackendsDown(inv Inventory) (down map[string]BackendDown, up []string) {
	if !inv.ServicesKnown {
		return nil, nil
	}
	services := index(inv.Services)
	down = map[string]BackendDown{}
	for _, cfg := range inv.WebhookConfigurations {
		for _, w := range webhooks(cfg) {
			if w.failurePolicy != "Fail" || w.svcName == "" {
				continue
			}
			key := w.svcNamespace + "/" + w.svcName
			if p, since := backendProblem(Inventory{Services: inv.Services, EndpointsKnown: inv.EndpointsKnown,
				EndpointSlices: inv.EndpointSlices, Endpoints: inv.Endpoints, Pods: inv.Pods}, services, key); p != "" {
				down[key] = since
			} else if inv.EndpointsKnown {
				up = append(up, key)
			}
		}
	}
	return down, up
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
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
		if s.GetNamespace() != ns || s.GetLabels()[discoveryServiceLabel] != svc {
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
			state, nsText := namespaceOf(inv, ref.Name, string(ref.UID))
			f := syncmedic.NewFinding(syncmedic.RuleWebhookNamespaceOwned, objectRef(cfg), namespaceOwnedSummary(cfg, ref.Name, state))
			f.Since = cfg.GetCreationTimestamp().Time
			f.Evidence = []syncmedic.Evidence{
				{Field: "metadata.ownerReferences", Value: fmt.Sprintf("Namespace/%s (uid %s, controller: true)", ref.Name, ref.UID)},
				namespaceEvidence(inv, ref.Name, nsText),
			}
			for _, w := range webhooks(cfg) {
				f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "webhooks[" + w.name + "]", Value: fmt.Sprintf("failurePolicy %s, service %s/%s", w.failurePolicy, w.svcNamespace, w.svcName)})
			}
			if state == namespaceTerminating || state == namespaceGone {
				f.Remedy = ownerGoneRemedy(cfg, ref.Name)
			} else {
				f.Remedy = namespaceOwnedRemedy(cfg, ref.Name)
			}
			out = append(out, f)
		}
	}
	return out
}

// namespaceOwnedSummary is the finding's message: what becomes of the configuration when its owning Namespace
// goes, or, when it is Terminating or gone already, that its backend went with it.
func namespaceOwnedSummary(cfg *unstructured.Unstructured, namespace string, state namespaceState) string {
	what := cfg.GetKind() + " " + cfg.GetName() + " is controlled by Namespace " + namespace
	switch state {
	case namespaceTerminating:
		return what + ", which is Terminating: the webhook's backend is deleted with it, and the configuration stays until the Namespace is gone"
	case namespaceGone:
		return what + ", which is gone: so is the webhook's backend, and the configuration was left behind"
	}
	return what + ": Argo CD will not prune it, so uninstalling the app leaves a webhook without a backend"
}

// namespaceEvidence is what the source saw of Namespace name (text from namespaceOf), or that it did not read
// Namespaces; a Terminating Namespace is dated from its deletion.
func namespaceEvidence(inv Inventory, name, text string) syncmedic.Evidence {
	if !inv.NamespacesKnown {
		return syncmedic.Evidence{Field: "namespace", Value: "Namespace " + name + ": not read (Namespaces were not listed)"}
	}
	return syncmedic.Evidence{Field: "namespace", Value: text, Since: namespaceDeleted(inv, name)}
}

// ownerGoneRemedy says what to do with a configuration whose owning Namespace is Terminating or gone: its backend
// is gone, so delete the configuration (what the garbage collector does once the Namespace is gone, unless something
// holds it) or make it fail open meanwhile.
func ownerGoneRemedy(cfg *unstructured.Unstructured, namespace string) syncmedic.Remedy {
	res := resourceArg(cfg)
	return syncmedic.Remedy{
		Description: fmt.Sprintf("Namespace %s, which owns this configuration, is Terminating or gone, and the webhook's backend with it: delete the configuration (the garbage collector does so once the Namespace is gone), or make its webhooks fail open until then. If the Namespace stays Terminating, see what holds it (kubectl get namespace %s -o yaml: status.conditions).", namespace, namespace),
		Commands: []string{
			fmt.Sprintf("kubectl get namespace %s -o jsonpath='{.status.conditions}'", namespace),
			fmt.Sprintf("kubectl delete %s %s", res, cfg.GetName()),
		},
	}
}

// isKnative reports whether a webhook configuration is Knative's: its name or a webhook's ends in .knative.dev, or
// it is labelled as part of Knative.
func isKnative(cfg *unstructured.Unstructured) bool {
	if strings.HasSuffix(cfg.GetName(), ".knative.dev") || strings.HasPrefix(cfg.GetLabels()["app.kubernetes.io/part-of"], "knative") {
		return true
	}
	for _, w := range webhooks(cfg) {
		if strings.HasSuffix(w.name, ".knative.dev") {
			return true
		}
	}
	return false
}

// namespaceOwnedRemedy says what fixes a namespace-owned webhook configuration: for Knative the
// WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP switch on the Deployment behind the webhook's Service, for anything else only
// what applies to every component (remove the reference once; ask the component not to set it).
func namespaceOwnedRemedy(cfg *unstructured.Unstructured, namespace string) syncmedic.Remedy {
	unown := fmt.Sprintf(`kubectl patch %s %s --type json -p '[{"op":"remove","path":"/metadata/ownerReferences"}]'`, resourceArg(cfg), cfg.GetName())
	if !isKnative(cfg) {
		return syncmedic.Remedy{
			Description: fmt.Sprintf("Remove the Namespace owner reference once so Argo CD can prune the configuration with its app, and make the component that writes it stop doing so (check its chart or flags for an option); until then, deleting the app leaves this webhook behind. Namespace %s itself is not touched.", namespace),
			Commands:    []string{unown},
		}
	}
	deploy, deployNS := "webhook", namespace
	for _, w := range webhooks(cfg) {
		if w.svcName != "" {
			deploy, deployNS = w.svcName, w.svcNamespace // Knative names the Deployment after its Service
			break
		}
	}
	return syncmedic.Remedy{
		Description: "For Knative ≥1.16 set WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP=true on the webhook Deployment (knative/pkg #3106, #3108; the syncmedic CMP can inject it with fix=knative-ownership); it does not strip owner references already present, so remove this one once (knative/serving #15483). Knative ≥1.20 writes a non-controller reference (knative/pkg #3255).",
		Commands: []string{
			fmt.Sprintf("kubectl -n %s set env deployment/%s WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP=true", deployNS, deploy),
			unown,
		},
	}
}
