package workflows_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/wfreal"
	"github.com/syncmedic/syncmedic/kube"
)

const (
	ruleArtifactGC = string(syncmedic.RuleArtifactGCFinalizerStuck)
	ruleStuck      = string(syncmedic.RuleStuckTerminating)
)

// failingBuild is a one-step Workflow whose step declares an output artifact garbage-collected on deletion (so the
// controller adds the artifact-gc finalizer) and fails before producing it: a Failed Workflow with nothing to
// collect (argo-workflows #13499).
const failingBuild = `apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: %s}
spec:
  entrypoint: main
  artifactGC: {strategy: OnWorkflowDeletion}
  templates:
  - name: main
    container: {image: busybox, command: [sh, -c, "make > /tmp/report.txt"]}
    outputs: {artifacts: [{name: report, path: /tmp/report.txt}]}
`

// packageAndPublish is a two-step Workflow whose first step uploads an artifact garbage-collected on deletion and
// whose second step fails: a Failed Workflow with one artifact to collect.
const packageAndPublish = `apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: %s}
spec:
  entrypoint: main
  artifactGC: {strategy: OnWorkflowDeletion}
  templates:
  - name: main
    steps:
    - - {name: package, template: package}
    - - {name: publish, template: publish}
  - name: package
    container: {image: busybox, command: [sh, -c, "tar czf /tmp/bundle.tgz /etc"]}
    outputs: {artifacts: [{name: bundle, path: /tmp/bundle.tgz}]}
  - name: publish
    container: {image: busybox, command: [sh, -c, "exit 1"]}
`

// compressAbove is the controller's MAX_WORKFLOW_SIZE in the compressed-node-status test: packageAndPublish is about
// 4.3 kB as the controller measures it (JSON with managed fields), about 2.9 kB with its nodes compressed, so the
// controller keeps its node status in status.compressedNodes from its second step on.
const compressAbove = 3500

// ruleOf is how an incident's Slack message names its rule (the Rule field's link text); the evidence of other
// rules may mention a rule ID in prose.
func ruleOf(rule string) string { return "|" + rule + `\u003e` }

func failed(wf *unstructured.Unstructured) bool {
	if wf == nil {
		return false
	}
	p, _, _ := unstructured.NestedString(wf.Object, "status", "phase")
	return p == "Failed" && hasFinalizer(wf)
}

func gone(wf *unstructured.Unstructured) bool { return wf == nil }

// TestArtifactGCFinalizerOfAFailedWorkflowWithoutArtifacts: on v3.5.10 a deleted Workflow that failed before
// producing its artifact keeps the artifact-gc finalizer for good (argo-workflows #13499: the controller waits for a
// garbage-collection Pod it never creates). serve reports it under the artifact-gc rule, its node status in
// status.nodes counted (no artifact), but does not set spec.artifactGC.forceFinalizerRemoval: the controller honours
// that field only once the garbage-collection Pods it created have ended (AllArtifactGCPodsRecouped), and it created
// none — written here the way syncmedic's remedy wrote it before, the field changes nothing. The fix the finding
// proposes, removing the finalizer entry by hand, lets the Workflow go.
func TestArtifactGCFinalizerOfAFailedWorkflowWithoutArtifacts(t *testing.T) {
	row := conformance.Row{Version: wfreal.V3510, Scenario: "failed Workflow without artifacts, node status in status.nodes, deleted (#13499)"}
	defer record(t, &row)
	env := testenv.KubeWithControllers(t)
	ns := env.Namespace(t)
	ctl := wfreal.Start(t, env, ns, wfreal.Options{Version: wfreal.V3510})
	env.Kubelet(t, ns, func(pod *corev1.Pod) (corev1.PodPhase, bool) {
		return corev1.PodFailed, !wfreal.IsArtifactGCPod(pod)
	})
	name := "build"
	createWorkflow(t, env, ns, fmt.Sprintf(failingBuild, name))
	wf := waitWorkflow(t, env, ns, name, 2*time.Minute, "Failed with the artifact-gc finalizer", failed)
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	require.NotEmpty(t, nodes, "the controller keeps the node status in status.nodes")
	require.NotContains(t, wf.Object["status"], "compressedNodes")

	d := startServe(t, env, autoPolicy)
	deleteWorkflow(t, env, ns, name)
	require.Eventually(t, func() bool { return len(d.slack.Roots(ruleOf(ruleArtifactGC), ns+"/"+name)) > 0 }, 2*time.Minute, 200*time.Millisecond,
		"serve reports the Workflow under the artifact-gc rule")
	wf = getWorkflow(t, env, ns, name)
	row.Controller = describe(wf)

	t.Run("serve reports exactly this Workflow, proposes the removal by hand and applies nothing", func(t *testing.T) {
		root := d.slack.Roots(ruleOf(ruleArtifactGC), ns+"/"+name)
		require.Len(t, root, 1)
		require.Contains(t, root[0].Blocks, "has no effect here")
		require.Contains(t, root[0].Blocks, "syncmedic will not act", "the finding offers no syncmedic action")
		require.NotContains(t, root[0].Blocks, "syncmedic fix", "and no fix command")
		require.Contains(t, root[0].Blocks, `--type json -p`)
		require.Len(t, d.roots(), 1, "one incident in all")
		require.Empty(t, d.remediations(), "serve applied nothing")
		require.False(t, forced(wf), "spec.artifactGC.forceFinalizerRemoval is not written")
		require.True(t, hasFinalizer(wf))
	})

	t.Run("forceFinalizerRemoval, as the old remedy wrote it, changes nothing on the real controller", func(t *testing.T) {
		passes := ctl.Passes(name)
		_, err := env.Dynamic.Resource(testenv.WorkflowGVR).Namespace(ns).Patch(context.Background(), name, types.MergePatchType,
			[]byte(kube.ForceFinalizerRemovalPatch), metav1.PatchOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return ctl.Passes(name) > passes }, time.Minute, 200*time.Millisecond,
			"the controller processes the patched Workflow")
		time.Sleep(3 * time.Second) // the pass that started has written whatever it writes (it takes milliseconds)
		wf := getWorkflow(t, env, ns, name)
		require.True(t, forced(wf))
		require.True(t, hasFinalizer(wf), "the controller ignores forceFinalizerRemoval without a garbage-collection Pod")
		row.Controller += "; spec.artifactGC.forceFinalizerRemoval: true written by hand: after the controller's next pass still " + describe(wf)
	})

	// The proposed fix, as a person runs it: the JSON patch of the finding's kubectl command.
	patch := `[{"op":"test","path":"/metadata/finalizers/0","value":"` + testenv.ArtifactGCFinalizer + `"},{"op":"remove","path":"/metadata/finalizers/0"}]`
	_, err := env.Dynamic.Resource(testenv.WorkflowGVR).Namespace(ns).Patch(context.Background(), name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	waitWorkflow(t, env, ns, name, time.Minute, "gone", gone)
	require.Len(t, d.roots(), 1, "nothing else reported")
	require.Empty(t, d.remediations(), "serve applied nothing")
	row.Controller += "; the finalizer removed by hand as the finding proposes: Workflow gone"
	row.Syncmedic = ruleArtifactGC + " (0 output artifacts counted in status.nodes, no garbage-collection Pod recorded), on auto: the removal by hand proposed, forceFinalizerRemoval not written (the controller ignores it); nothing else reported"
}

// TestArtifactGCFinalizerOfAFailedWorkflowWithoutArtifactsOnV362: the near miss of the test above on a fixed
// controller (#13500): v3.6.2 removes the artifact-gc finalizer of a failed Workflow with nothing to collect as soon as
// the Workflow completes, so its deletion goes through and serve, evaluating the cluster meanwhile, reports nothing.
func TestArtifactGCFinalizerOfAFailedWorkflowWithoutArtifactsOnV362(t *testing.T) {
	row := conformance.Row{Version: wfreal.V362, Scenario: "failed Workflow without artifacts, node status in status.nodes, deleted (#13499)"}
	defer record(t, &row)
	env := testenv.KubeWithControllers(t)
	ns := env.Namespace(t)
	ctl := wfreal.Start(t, env, ns, wfreal.Options{Version: wfreal.V362})
	env.Kubelet(t, ns, func(pod *corev1.Pod) (corev1.PodPhase, bool) {
		return corev1.PodFailed, !wfreal.IsArtifactGCPod(pod)
	})
	d := startServe(t, env, autoPolicy)
	name := "build"
	createWorkflow(t, env, ns, fmt.Sprintf(failingBuild, name))
	require.Eventually(t, func() bool { return ctl.Passes(name) > 0 }, 2*time.Minute, 200*time.Millisecond)
	wf := waitWorkflow(t, env, ns, name, 2*time.Minute, "Failed, its finalizer removed by the controller", func(wf *unstructured.Unstructured) bool {
		p, _, _ := unstructured.NestedString(wf.Object, "status", "phase")
		return p == "Failed" && !hasFinalizer(wf)
	})
	logs, err := os.ReadFile(ctl.Process.LogPath)
	require.NoError(t, err)
	require.Contains(t, string(logs), `msg="adding artifact GC finalizer" namespace=`+ns+` workflow=`+name, "the controller added the finalizer")
	require.Contains(t, string(logs), `msg="no remaining artifacts to GC, removing artifact GC finalizer (forceFinalizerRemoval=false)" namespace=`+ns+` workflow=`+name)
	row.Controller = describe(wf) + " (the controller added the artifact-gc finalizer and removed it once the Workflow completed)"
	before := d.evaluations()
	deleteWorkflow(t, env, ns, name)
	waitWorkflow(t, env, ns, name, time.Minute, "gone", gone)
	row.Controller += "; deleted: gone at once"
	require.Eventually(t, func() bool { return d.evaluations() > before }, 30*time.Second, 100*time.Millisecond,
		"serve evaluated the cluster after the deletion")
	require.Empty(t, d.roots(), "nothing reported")
	require.Empty(t, d.remediations(), "nothing applied")
	row.Syncmedic = "no finding, nothing applied (serve evaluated the cluster through the deletion)"
}

// The tests of this file play the kubelet (Env.Kubelet), not the real node (issue 28): the workflow-controller's
// Pods are its own specs, running Argo Workflows' executor (argoexec) in their init, wait and artifact-gc containers,
// which the node has no image of; the executor's part is played too (wfreal), so each Pod's outcome and moment —
// a step failing, the package step held until its outputs are reported, a garbage-collection Pod run only once the
// test lets it — is the exact interleaving the test chooses, which a node running those specs cannot give.

// gcKubelet plays the kubelet for the compressed-node-status test: steps named publish fail, the package step waits
// for the test (which reports its outputs first), and a Workflow's artifact-gc Pod runs only once the test let it.
type gcKubelet struct {
	mu      sync.Mutex
	allowed map[string]bool
}

func (k *gcKubelet) allow(wf string) { k.mu.Lock(); defer k.mu.Unlock(); k.allowed[wf] = true }

func (k *gcKubelet) decide(pod *corev1.Pod) (corev1.PodPhase, bool) {
	switch {
	case wfreal.IsArtifactGCPod(pod):
		k.mu.Lock()
		defer k.mu.Unlock()
		return corev1.PodSucceeded, k.allowed[pod.Labels[wfreal.LabelWorkflow]]
	case strings.Contains(pod.Name, "-publish-"):
		return corev1.PodFailed, true
	}
	return "", false
}

// TestArtifactGCOnCompressedNodeStatusIsLeftToTheGarbageCollection: the controller keeps the node status of a
// Failed Workflow with one artifact in status.compressedNodes (MAX_WORKFLOW_SIZE). Counting only status.nodes would
// see no artifact and force the finalizer off, skipping the real garbage collection and leaking the artifact. A
// healthy Workflow whose garbage collection completes is deleted with nothing reported; one whose garbage-collection
// Pod does not run is reported stuck terminating, never by the artifact-gc rule, and nothing forces its finalizer:
// once the Pod runs, the controller removes the finalizer itself.
func TestArtifactGCOnCompressedNodeStatusIsLeftToTheGarbageCollection(t *testing.T) {
	row := conformance.Row{Version: wfreal.V362, Scenario: "failed Workflow with an artifact, node status compressed (status.compressedNodes), artifact GC slow or stuck"}
	defer record(t, &row)
	env := testenv.KubeWithControllers(t)
	ns := env.Namespace(t)
	ctl := wfreal.Start(t, env, ns, wfreal.Options{MaxWorkflowSize: compressAbove})
	k := &gcKubelet{allowed: map[string]bool{}}
	kubelet := env.Kubelet(t, ns, k.decide)
	run := func(name string) *unstructured.Unstructured {
		createWorkflow(t, env, ns, fmt.Sprintf(packageAndPublish, name))
		pkg := podOf(t, env, ns, name, "-package-")
		// hand-written state: see wfreal.ReportOutputs: argoexec's report of the step's artifact (no kubelet runs
		// the step's wait container here).
		ctl.ReportOutputs(t, pkg, "bundle")
		env.SetPodPhase(t, ns, pkg.Name, corev1.PodSucceeded)
		wf := waitWorkflow(t, env, ns, name, 2*time.Minute, "Failed with the artifact-gc finalizer", failed)
		nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
		compressed, _, _ := unstructured.NestedString(wf.Object, "status", "compressedNodes")
		require.Empty(t, nodes, "the controller compressed the node status")
		require.NotEmpty(t, compressed, "the controller compressed the node status")
		return wf
	}
	healthy, stuck := run("release"), run("hotfix")
	row.Controller = describe(stuck)
	d := startServe(t, env, autoPolicy)

	t.Run("a Workflow whose garbage collection completes is deleted with nothing reported", func(t *testing.T) {
		before := d.evaluations()
		deleteWorkflow(t, env, ns, healthy.GetName())
		gc := podOf(t, env, ns, healthy.GetName(), "-artgc-")
		// hand-written state: see wfreal.CollectArtifacts: argoexec's artifact-gc report of the controller's own
		// garbage-collection Pod (no kubelet runs argoexec here).
		require.Equal(t, 1, ctl.CollectArtifacts(t, gc.Name))
		k.allow(healthy.GetName())
		kubelet.Poke()
		waitWorkflow(t, env, ns, healthy.GetName(), time.Minute, "gone", gone)
		require.Eventually(t, func() bool { return d.evaluations() > before+1 }, 30*time.Second, 100*time.Millisecond,
			"serve evaluated the cluster while the Workflow was being deleted")
		require.Empty(t, d.roots(), "nothing reported")
	})

	deleteWorkflow(t, env, ns, stuck.GetName())
	gc := podOf(t, env, ns, stuck.GetName(), "-artgc-")
	require.Eventually(t, func() bool { return len(d.slack.Roots(ruleOf(ruleStuck), stuck.GetName())) > 0 }, 2*time.Minute, 200*time.Millisecond,
		"serve reports the Workflow stuck terminating")
	wf := getWorkflow(t, env, ns, stuck.GetName())
	row.Controller += fmt.Sprintf("; deleted: artifact-gc Pod %s created, not run: %s", strings.Replace(gc.Name, stuck.GetName(), "<wf>", 1), describe(wf))

	t.Run("the artifact-gc rule does not fire and nothing forces the finalizer", func(t *testing.T) {
		require.True(t, hasFinalizer(wf))
		require.False(t, forced(wf), "spec.artifactGC.forceFinalizerRemoval is not written")
		require.Empty(t, d.slack.Roots(ruleOf(ruleArtifactGC)), "no artifact-gc incident")
		require.Len(t, d.roots(), 1, "one incident in all: %v", d.roots())
		require.Empty(t, d.remediations(), "serve applied nothing")
		fs := d.scan(t, ns, stuck.GetName())
		require.Len(t, fs, 1, "scan's findings on the Workflow: %v", fs)
		require.Equal(t, syncmedic.RuleStuckTerminating, fs[0].Rule)
		require.False(t, fs[0].Remedy.AutoSafe, "stuck terminating proposes, never acts")
	})

	// hand-written state: see wfreal.CollectArtifacts: argoexec's artifact-gc report of the controller's own
	// garbage-collection Pod (no kubelet runs argoexec here).
	require.Equal(t, 1, ctl.CollectArtifacts(t, gc.Name))
	k.allow(stuck.GetName())
	kubelet.Poke()
	waitWorkflow(t, env, ns, stuck.GetName(), time.Minute, "gone after its garbage collection", gone)
	require.False(t, forced(getWorkflow(t, env, ns, stuck.GetName())))
	row.Controller += "; artifact-gc Pod run: artifact deleted, finalizer removed by the controller, Workflow gone"
	row.Syncmedic = "no " + ruleArtifactGC + " finding (1 output artifact counted in the decoded status.compressedNodes), no forceFinalizerRemoval; " +
		ruleStuck + " reported (proposal only) while the garbage collection was stuck; the near miss whose garbage collection completed: no finding"
}
