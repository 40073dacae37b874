package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic"
)

// oldWebhook is a configuration 200 days old (at now) whose only webhook fails closed and calls policy/policy-webhook,
// with that Service and its EndpointSlice as old, as `kubectl get -o yaml` prints them (no managed fields).
const oldWebhook = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: policy.example.com, creationTimestamp: "2025-08-22T12:00:00Z"}
webhooks:
- name: validate.policy.example.com
  failurePolicy: Fail
  clientConfig:
    service: {namespace: policy, name: policy-webhook}
---
apiVersion: v1
kind: Service
metadata: {namespace: policy, name: policy-webhook, creationTimestamp: "2025-08-22T12:00:00Z"}
spec:
  selector: {app.kubernetes.io/name: policy-webhook}
  ports: [{port: 443, targetPort: 8443}]
`

// podRestarts are the states a dump taken 20 s after the webhook's only backend Pod restarted shows.
var podRestarts = []struct {
	name string
	// objects: the EndpointSlice and the Pods, at now.
	objects string
	// since and evidence: what the finding must be dated from once the backend stays down past the threshold.
	since    time.Time
	evidence string
}{
	{
		name: "a Recreate rollout: the Pod deleted while Ready, its replacement not ready yet, the slice's trigger time deleted by the endpoints controller",
		objects: `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  namespace: policy
  name: policy-webhook-x7k2p
  creationTimestamp: "2025-08-22T12:00:01Z"
  labels: {kubernetes.io/service-name: policy-webhook}
endpoints:
- addresses: [10.244.0.17]
  conditions: {ready: false, serving: true, terminating: true}
  targetRef: {kind: Pod, namespace: policy, name: policy-webhook-5d9c7-abcde}
---
apiVersion: v1
kind: Pod
metadata:
  namespace: policy
  name: policy-webhook-5d9c7-abcde
  labels: {app.kubernetes.io/name: policy-webhook, pod-template-hash: 5d9c7}
  creationTimestamp: "2026-02-01T00:00:00Z"
  deletionTimestamp: "2026-03-10T12:00:10Z"
  deletionGracePeriodSeconds: 30
status:
  phase: Running
  conditions:
  - {type: Ready, status: "True", lastTransitionTime: "2026-02-01T00:00:05Z"}
---
apiVersion: v1
kind: Pod
metadata:
  namespace: policy
  name: policy-webhook-7b4f8-fghij
  labels: {app.kubernetes.io/name: policy-webhook, pod-template-hash: 7b4f8}
  creationTimestamp: "2026-03-10T11:59:41Z"
status:
  phase: Pending
  conditions:
  - {type: PodScheduled, status: "True", lastTransitionTime: "2026-03-10T11:59:41Z"}
  - {type: Ready, status: "False", reason: ContainersNotReady, lastTransitionTime: "2026-03-10T11:59:42Z"}
---
apiVersion: v1
kind: Pod
metadata:
  namespace: other
  name: policy-webhook-elsewhere
  labels: {app.kubernetes.io/name: policy-webhook}
  creationTimestamp: "2026-03-10T11:59:58Z"
`,
		since:    time.Date(2026, 3, 10, 11, 59, 42, 0, time.UTC),
		evidence: "2026-03-10T11:59:42Z, from Pod policy/policy-webhook-7b4f8-fghij: Ready condition False since then (status.conditions lastTransitionTime)",
	},
	{
		name: "a container restarted in place, the slice's trigger time reset to the Service's creation by a restarted endpoints controller",
		objects: `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  namespace: policy
  name: policy-webhook-x7k2p
  creationTimestamp: "2025-08-22T12:00:01Z"
  labels: {kubernetes.io/service-name: policy-webhook}
  annotations: {endpoints.kubernetes.io/last-change-trigger-time: "2025-08-22T12:00:00Z"}
endpoints:
- addresses: [10.244.0.17]
  conditions: {ready: false, serving: false, terminating: false}
  targetRef: {kind: Pod, namespace: policy, name: policy-webhook-5d9c7-abcde}
---
apiVersion: v1
kind: Pod
metadata:
  namespace: policy
  name: policy-webhook-5d9c7-abcde
  labels: {app.kubernetes.io/name: policy-webhook, pod-template-hash: 5d9c7}
  creationTimestamp: "2026-02-01T00:00:00Z"
status:
  phase: Running
  conditions:
  - {type: Ready, status: "False", reason: ContainersNotReady, lastTransitionTime: "2026-03-10T11:59:40Z"}
  containerStatuses:
  - {name: webhook, ready: false, restartCount: 1}
`,
		since:    time.Date(2026, 3, 10, 11, 59, 40, 0, time.UTC),
		evidence: "2026-03-10T11:59:40Z, from Pod policy/policy-webhook-5d9c7-abcde: Ready condition False since then (status.conditions lastTransitionTime)",
	},
}

// dumpInventory is the Inventory a dump of docs (YAML documents) gives the rules.
func dumpInventory(t *testing.T, docs ...string) Inventory {
	t.Helper()
	inv := Inventory{ServicesKnown: true, EndpointsKnown: true}
	for _, d := range strings.Split(strings.Join(docs, "\n---\n"), "\n---\n") {
		j, err := yaml.YAMLToJSON([]byte(d))
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(j), "as the apiserver's JSON decodes: integers stay integers")
		switch u.GetKind() {
		case "ValidatingWebhookConfiguration":
			inv.WebhookConfigurations = append(inv.WebhookConfigurations, u)
		case "Service":
			inv.Services = append(inv.Services, u)
		case "EndpointSlice":
			inv.EndpointSlices = append(inv.EndpointSlices, u)
		case "Pod":
			inv.Pods = append(inv.Pods, u)
		default:
			t.Fatalf("no place in the inventory for a %s", u.GetKind())
		}
	}
	return inv
}

// TestAWebhookBackendRestartIsDatedFromThePodNotTheConfiguration: a configuration 200 days old whose only backend Pod
// restarted 20 s before the dump is not reported (the backend is dated from its Pods, not from the configuration,
// the Service or the slice, all 200 days old); the same dump judged past the threshold reports exactly that
// configuration, dated from the Pod's evidence and saying so.
func TestAWebhookBackendRestartIsDatedFromThePodNotTheConfiguration(t *testing.T) {
	th := DefaultThresholds()
	for _, tc := range podRestarts {
		t.Run(tc.name, func(t *testing.T) {
			inv := dumpInventory(t, oldWebhook, tc.objects)
			require.Empty(t, Evaluate(inv, now, th), "20 s after the restart, within the %s threshold", th.WebhookBackend)
			require.Equal(t, tc.since.Add(th.WebhookBackend), NextThreshold(inv, now, th).UTC(), "the scanner looks again when the threshold passes")

			later := now.Add(2 * time.Minute)
			fs := Evaluate(inv, later, th)
			require.Len(t, fs, 1, "exactly one finding: %v", fs)
			f := fs[0]
			require.Equal(t, syncmedic.RuleWebhookBackendMissing, f.Rule)
			require.Equal(t, "ValidatingWebhookConfiguration", f.Object.Kind)
			require.Equal(t, "policy.example.com", f.Object.Name)
			require.Equal(t, "Webhook validate.policy.example.com (ValidatingWebhookConfiguration policy.example.com) rejects every write it matches: Service policy/policy-webhook has no ready endpoints and failurePolicy is Fail", f.Summary)
			require.Equal(t, tc.since, f.Since.UTC(), "dated from when the backend was last up, not from the configuration's creation")
			since, ok := evidence(f, "since")
			require.True(t, ok, "the finding says since when: %v", f.Evidence)
			require.Equal(t, tc.evidence, since.Value)
		})
	}
}

// TestAWebhookBackendIsDatedFromTheLatestEvidence: each piece of evidence, when it is the latest, dates a Service
// without ready endpoints, and the finding names it.
func TestAWebhookBackendIsDatedFromTheLatestEvidence(t *testing.T) {
	const slice = `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  namespace: policy
  name: policy-webhook-x7k2p
  creationTimestamp: "2025-09-01T00:00:00Z"
  labels: {kubernetes.io/service-name: policy-webhook}
endpoints: []
`
	cases := []struct {
		name     string
		objects  string
		edit     func(inv *Inventory)
		since    time.Time
		evidence string
	}{
		{
			name:     "the slice's creation, with nothing later",
			objects:  slice,
			since:    time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC),
			evidence: "2025-09-01T00:00:00Z, from EndpointSlice policy/policy-webhook-x7k2p created",
		},
		{
			name:     "the slice's trigger-time annotation",
			objects:  strings.Replace(slice, "  labels:", "  annotations: {endpoints.kubernetes.io/last-change-trigger-time: \"2026-03-01T00:00:00Z\"}\n  labels:", 1),
			since:    time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
			evidence: "2026-03-01T00:00:00Z, from EndpointSlice policy/policy-webhook-x7k2p: annotation endpoints.kubernetes.io/last-change-trigger-time (a Pod's last readiness change)",
		},
		{
			name:     "the slice's last write",
			objects:  strings.Replace(slice, "  labels:", "  managedFields:\n  - {manager: endpointslice-controller, operation: Update, time: \"2026-03-02T00:00:00Z\"}\n  labels:", 1),
			since:    time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC),
			evidence: "2026-03-02T00:00:00Z, from EndpointSlice policy/policy-webhook-x7k2p last written (metadata.managedFields)",
		},
		{
			name: "a Pod not scheduled yet: its creation",
			objects: slice + `---
apiVersion: v1
kind: Pod
metadata: {namespace: policy, name: policy-webhook-new, labels: {app.kubernetes.io/name: policy-webhook}, creationTimestamp: "2026-03-03T00:00:00Z"}
status: {phase: Pending}
`,
			since:    time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC),
			evidence: "2026-03-03T00:00:00Z, from Pod policy/policy-webhook-new created, not ready yet (no Ready condition)",
		},
		{
			name: "a Pod deleted while Ready: when its deletion was asked for",
			objects: slice + `---
apiVersion: v1
kind: Pod
metadata: {namespace: policy, name: policy-webhook-old, labels: {app.kubernetes.io/name: policy-webhook}, creationTimestamp: "2025-10-01T00:00:00Z",
  deletionTimestamp: "2026-03-04T00:00:30Z", deletionGracePeriodSeconds: 30}
status:
  conditions: [{type: Ready, status: "True", lastTransitionTime: "2025-10-01T00:00:05Z"}]
`,
			since:    time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC),
			evidence: "2026-03-04T00:00:00Z, from Pod policy/policy-webhook-old deleted while Ready (metadata.deletionTimestamp − deletionGracePeriodSeconds)",
		},
		{
			name:    "the configuration's creation, when the backend went down before it was installed",
			objects: slice,
			edit: func(inv *Inventory) {
				inv.WebhookConfigurations[0].SetCreationTimestamp(metav1.NewTime(time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)))
			},
			since:    time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC),
			evidence: "2026-03-05T00:00:00Z, from ValidatingWebhookConfiguration policy.example.com created (after the backend went down)",
		},
		{
			name:    "what the live scanner tracked, over the objects",
			objects: slice,
			edit: func(inv *Inventory) {
				inv.BackendDownSince = map[string]BackendDown{"policy/policy-webhook": {Since: time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC), Evidence: "first seen down by this scanner"}}
			},
			since:    time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC),
			evidence: "2026-03-06T00:00:00Z, from first seen down by this scanner",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inv := dumpInventory(t, oldWebhook, tc.objects)
			if tc.edit != nil {
				tc.edit(&inv)
			}
			fs := Evaluate(inv, now, DefaultThresholds())
			require.Len(t, fs, 1, "exactly one finding: %v", fs)
			require.Equal(t, syncmedic.RuleWebhookBackendMissing, fs[0].Rule)
			require.Equal(t, "policy.example.com", fs[0].Object.Name)
			require.Equal(t, tc.since, fs[0].Since.UTC())
			since, ok := evidence(fs[0], "since")
			require.True(t, ok, "the finding says since when: %v", fs[0].Evidence)
			require.Equal(t, tc.evidence, since.Value)
		})
	}
}
