package flux_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// selectorDeployment is a Deployment whose selector (immutable once created) and Pod labels are app: <selector>.
func selectorDeployment(name, selector string) string {
	return strings.ReplaceAll(deploymentManifest(name), "{app: "+name+"}", "{app: "+selector+"}")
}

// Issue 49 item 7 on the real kustomize-controller v1.7.3: Kustomization "web" applied a Deployment; a commit then
// changes the Deployment's selector, which the apiserver never lets change. kustomize-controller's apply is refused
// ("dry-run failed (Invalid): ... field is immutable", Ready=False) on every retry, and serve (threshold 5s) announces
// flux/kustomization-immutable-field naming the Deployment and spec.selector, notify only (the ways out recreate an
// object). Near miss: "forced", the same change under spec.force: true, which kustomize-controller recreates and
// applies: evaluated, not reported.
func TestKustomizationImmutableFieldIsAnnounced(t *testing.T) {
	stack, ns, git := kustomizeStack(t)
	t.Parallel()
	row := &conformance.Row{Version: kustomizeV1, Scenario: "a commit changes a Deployment's selector (immutable); spec.force false vs true (serve, threshold 5s)"}
	defer record(t, row)
	git.Repo.Write(t, "web/deployment.yaml", selectorDeployment("web", "web"))
	git.Repo.Write(t, "forced/deployment.yaml", selectorDeployment("api", "api"))
	git.Repo.Commit(t, "first")
	fluxreal.CreateGitRepository(t, stack.Env, ns, git, 2*time.Second)
	d := startServe(t, stack, ns, notifyPolicy, "--kustomization-threshold", kustomizationThreshold.String())
	from := d.logLen()
	stack.CreateKustomization(t, ns, fluxreal.Kustomization{Name: "web", Path: "./web", Interval: 10 * time.Second, TargetNamespace: ns})
	stack.CreateKustomization(t, ns, fluxreal.Kustomization{Name: "forced", Path: "./forced", Interval: 10 * time.Second, TargetNamespace: ns, Force: true})
	for _, name := range []string{"web", "forced"} {
		stack.WaitForKustomization(t, ns, name, 90*time.Second, "Ready", fluxreal.KustomizationReady)
	}
	git.Repo.Write(t, "web/deployment.yaml", selectorDeployment("web", "web-v2"))
	git.Repo.Write(t, "forced/deployment.yaml", selectorDeployment("api", "api-v2"))
	second := git.Repo.Commit(t, "change the selectors")

	refused := stack.WaitForKustomization(t, ns, "web", 90*time.Second, "the apply refused", func(u *unstructured.Unstructured) bool {
		status, _, msg := fluxreal.KustomizationCondition(u, "Ready")
		return status == "False" && strings.Contains(msg, "field is immutable")
	})
	_, reason, msg := fluxreal.KustomizationCondition(refused, "Ready")
	stack.WaitForKustomization(t, ns, "forced", 90*time.Second, "the forced one applied the new commit", func(u *unstructured.Unstructured) bool {
		rev, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
		return fluxreal.KustomizationReady(u) && strings.HasSuffix(rev, second)
	})

	root := announcedOnce(t, d.slack, syncmedic.RuleKustomizationImmutableField, "web", 90*time.Second, "flux/kustomization-immutable-field announced on Slack")
	require.Contains(t, root.Text, "Deployment/"+ns+"/web's spec.selector")
	f, ok := d.scanFinding(t, syncmedic.RuleKustomizationImmutableField, ns, "web", "--kustomization-threshold", kustomizationThreshold.String())
	require.True(t, ok, "scan --kubeconfig reports it too")
	require.Empty(t, f.Remedy.Action, "notify only")
	// Past another retry, still refused the same way, and nothing else announced (stale-revision leaves it to this rule).
	stack.WaitForKustomization(t, ns, "web", 60*time.Second, "refused again on a later retry", func(u *unstructured.Unstructured) bool {
		status, _, m := fluxreal.KustomizationCondition(u, "Ready")
		return status == "False" && strings.Contains(m, "field is immutable") && u.GetResourceVersion() != refused.GetResourceVersion()
	})
	time.Sleep(10*time.Second + kustomizationThreshold)
	onlyAnnouncement(t, d, root)
	evals := d.lookedAtKustomization(t, ns, "forced", from)
	row.Controller = fmt.Sprintf("Ready=False %s %q on every retry; with spec.force: the Deployment recreated, Ready at the new commit",
		reason, testNamespace.ReplaceAllString(firstLine(msg), "<ns>"))
	row.Syncmedic = fmt.Sprintf("flux/kustomization-immutable-field on Kustomization web, naming Deployment/<ns>/web's spec.selector (notify; scan too); spec.force: no finding (evaluated: %t)", evals > 0)
}
