package flux_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// autoPolicy lets syncmedic apply the Flux remedies it considers safe; resolveAfter 1 so a fixed release resolves
// on the next evaluation.
const autoPolicy = `resolveAfter: 1
rules:
  flux/dependency-not-ready-false:
    mode: auto
    rateLimit: {max: 10, window: 1h, backoff: 1s, maxBackoff: 5s}
  flux/retries-exhausted:
    mode: auto
  flux/helmrelease-stale-status:
    mode: auto
    rateLimit: {max: 10, window: 1h, backoff: 1s, maxBackoff: 5s}
`

// smallThresholds make the rules judge within seconds; the controllers keep their own default timings.
var smallThresholds = []string{"--dependency-not-ready-threshold", "5s", "--stale-status-threshold", "5s"}

const helmV1 = "helm-controller " + "v1.4.3"

// record registers the conformance row when the test ends (also when it fails part-way: the row then says so).
// Call it deferred, so the row holds what the test observed; the tests' random namespace names are replaced by
// <ns>, so docs/compat.md does not change from run to run.
func record(t *testing.T, row *conformance.Row) {
	t.Helper()
	row.Tool = "Flux"
	row.Controller = testNamespace.ReplaceAllString(row.Controller, "<ns>")
	row.Syncmedic = testNamespace.ReplaceAllString(row.Syncmedic, "<ns>")
	conformance.Record(t, *row)
}

// testNamespace matches the names testenv gives test namespaces: the test's name, a dash, six hex digits.
var testNamespace = regexp.MustCompile(`\b[a-z0-9]+(?:-[a-z0-9]+)*-[0-9a-f]{6}\b`)

// firstLine is a condition message without the Helm log helm-controller appends after a blank line.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// annotations returns the reconcile request annotations of a HelmRelease (requestedAt, forceAt, resetAt).
func requestAnnotations(hr *helmv2.HelmRelease) map[string]string {
	out := map[string]string{}
	for _, k := range []string{meta.ReconcileRequestAnnotation, helmv2.ForceRequestAnnotation, helmv2.ResetRequestAnnotation} {
		if v, ok := hr.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

// handled reports whether helm-controller handled the reconcile request on hr (status.lastHandledReconcileAt
// equals the requestedAt annotation).
func handled(hr *helmv2.HelmRelease) bool {
	req := hr.Annotations[meta.ReconcileRequestAnnotation]
	return req != "" && hr.Status.LastHandledReconcileAt == req
}

// resetByHand does what `flux reconcile hr --reset` does: one RFC3339Nano value in requestedAt and resetAt.
func resetByHand(t *testing.T, s *fluxreal.Stack, ns, name string) string {
	t.Helper()
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(s.Helm.APIVersion)
	u.SetKind(helmv2.HelmReleaseKind)
	u.SetNamespace(ns)
	u.SetName(name)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		meta.ReconcileRequestAnnotation: ts, helmv2.ResetRequestAnnotation: ts}}})
	require.NoError(t, err)
	require.NoError(t, s.Env.Client.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, patch)))
	return ts
}

// scanFinding runs `syncmedic scan --kubeconfig` and returns the finding of rule on HelmRelease ns/name.
func (d *daemon) scanFinding(t *testing.T, rule syncmedic.RuleID, ns, name string, th ...string) (syncmedic.Finding, bool) {
	t.Helper()
	out, _ := d.run(t, append([]string{"scan", "--kubeconfig", d.kube, "-o", "json"}, th...)...)
	var rep syncmedic.Report
	start := strings.IndexByte(out, '{')
	require.GreaterOrEqual(t, start, 0, "scan printed no JSON: %s", out)
	require.NoError(t, json.Unmarshal([]byte(out[start:]), &rep), out)
	for _, f := range rep.Findings {
		if f.Rule == rule && f.Object.Namespace == ns && f.Object.Name == name {
			return f, true
		}
	}
	return syncmedic.Finding{}, false
}

var helmReleaseGVR = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}

var getOptions = metav1.GetOptions{}
