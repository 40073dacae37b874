package wfreal

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The Argo Workflows resources the executor writes.
var (
	TaskResultGVR     = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflowtaskresults"}
	ArtifactGCTaskGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflowartifactgctasks"}
)

// Labels and annotations of Argo Workflows' Pods and executor objects (workflow/common/common.go).
const (
	LabelWorkflow        = "workflows.argoproj.io/workflow"
	LabelOutputsReported = "workflows.argoproj.io/report-outputs-completed"
	LabelComponent       = "workflows.argoproj.io/component"
	AnnotationNodeID     = "workflows.argoproj.io/node-id"
	// ComponentArtifactGC is the component label of the artifact garbage-collection Pods.
	ComponentArtifactGC = "artifact-gc"
)

// ReportOutputs plays the wait container of a step's Pod: it writes the WorkflowTaskResult argoexec writes when the
// step ends (named after the node, labelled with the workflow and report-outputs-completed=true), recording one S3
// output artifact per name, at the key the executor would upload it to.
func (c *Controller) ReportOutputs(t testing.TB, pod *corev1.Pod, artifacts ...string) {
	t.Helper()
	nodeID := pod.Annotations[AnnotationNodeID]
	if nodeID == "" {
		t.Fatalf("wfreal: Pod %s has no %s annotation", pod.Name, AnnotationNodeID)
	}
	var arts []interface{}
	for _, name := range artifacts {
		arts = append(arts, map[string]interface{}{"name": name, "path": "/tmp/" + name,
			"s3": map[string]interface{}{"key": pod.Labels[LabelWorkflow] + "/" + pod.Name + "/" + name + ".tgz"}})
	}
	result := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTaskResult",
		"metadata": map[string]interface{}{"name": nodeID, "namespace": pod.Namespace,
			"labels": map[string]interface{}{LabelWorkflow: pod.Labels[LabelWorkflow], LabelOutputsReported: "true"}},
		"outputs": map[string]interface{}{"artifacts": arts},
	}}
	// hand-written state: the executor stand-in (argoexec's wait container does not run: no real kubelet) reports the
	// step's output artifacts as it does when the step ends.
	if _, err := c.Env.Dynamic.Resource(TaskResultGVR).Namespace(pod.Namespace).Create(context.Background(), result, metav1.CreateOptions{}); err != nil {
		t.Fatalf("wfreal: writing the WorkflowTaskResult of %s: %v", pod.Name, err)
	}
}

// CollectArtifacts plays argoexec's artifact-gc command in the garbage-collection Pod gcPod: it reports every
// artifact of the Pod's WorkflowArtifactGCTasks deleted, through the Tasks' status subresource as argoexec does
// (cmd/argoexec/commands/artifact/delete.go). It returns how many artifacts it reported.
func (c *Controller) CollectArtifacts(t testing.TB, gcPod string) int {
	t.Helper()
	ctx := context.Background()
	tasks := c.Env.Dynamic.Resource(ArtifactGCTaskGVR).Namespace(c.Namespace)
	list, err := tasks.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("wfreal: listing WorkflowArtifactGCTasks: %v", err)
	}
	n := 0
	for _, task := range list.Items {
		if !strings.HasPrefix(task.GetName(), gcPod+"-") {
			continue
		}
		byNode, _, _ := unstructured.NestedMap(task.Object, "spec", "artifactsByNode")
		results := map[string]interface{}{}
		for node, spec := range byNode {
			arts, _, _ := unstructured.NestedMap(spec.(map[string]interface{}), "artifacts")
			res := map[string]interface{}{}
			for name := range arts {
				res[name] = map[string]interface{}{"name": name, "success": true}
				n++
			}
			results[node] = map[string]interface{}{"artifactResults": res}
		}
		patch, err := json.Marshal(map[string]interface{}{"status": map[string]interface{}{"artifactResultsByNode": results}})
		if err != nil {
			t.Fatalf("wfreal: %v", err)
		}
		// hand-written state: the executor stand-in (argoexec's artifact-gc command does not run: no real kubelet)
		// reports the deletions as it does once the objects are gone from the repository.
		if _, err := tasks.Patch(ctx, task.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("wfreal: reporting WorkflowArtifactGCTask %s: %v", task.GetName(), err)
		}
	}
	if n == 0 {
		t.Fatalf("wfreal: no WorkflowArtifactGCTask of Pod %s lists an artifact", gcPod)
	}
	return n
}

// IsArtifactGCPod reports whether pod is one of the controller's artifact garbage-collection Pods.
func IsArtifactGCPod(pod *corev1.Pod) bool { return pod.Labels[LabelComponent] == ComponentArtifactGC }

// String names the controller in messages.
func (c *Controller) String() string {
	return fmt.Sprintf("workflow-controller %s for %s", c.Version, c.Namespace)
}
