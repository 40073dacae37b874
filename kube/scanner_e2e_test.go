package kube_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/kube"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var workflowsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}

type latestSink struct {
	mu       sync.Mutex
	findings []syncmedic.Finding
	subject  string
	n        int
}

func (s *latestSink) Observe(_ context.Context, subject string, fs []syncmedic.Finding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subject, s.findings = subject, fs
	s.n++
}

// find returns the latest finding of rule about namespace/name.
func (s *latestSink) find(rule syncmedic.RuleID, namespace, name string) (syncmedic.Finding, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.findings {
		if f.Rule == rule && f.Object.Namespace == namespace && f.Object.Name == name {
			return f, true
		}
	}
	return syncmedic.Finding{}, false
}

// Seed scenarios, as the incidents left them on the apiserver.

// scenarioStuckJob: a Job held by a finalizer nobody removes, then deleted.
func scenarioStuckJob(t *testing.T, env *testenv.Env, ns string) *batchv1.Job {
	ctx := context.Background()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: ns, Finalizers: []string{"example.com/cleanup"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "migrate", Image: "busybox"}}}}}}
	require.NoError(t, env.Client.Create(ctx, job))
	require.NoError(t, env.Client.Delete(ctx, job))
	return job
}

// scenarioOrphanWebhook: a failurePolicy Fail webhook whose Service was deleted with its app. It only matches
// ConfigMaps in namespaces labelled for this test, so the shared apiserver keeps working.
func scenarioOrphanWebhook(t *testing.T, env *testenv.Env, ns string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}
	require.NoError(t, env.Client.Create(ctx, svc))
	cfg := createFailingWebhook(t, env, ns, "validation."+ns, "validation.webhook.serving.knative.dev")
	require.NoError(t, env.Client.Delete(ctx, svc))
	return cfg
}

// scenarioFailedWorkflow: a Failed Workflow without output artifacts, held by the artifact-gc finalizer, deleted, with
// a garbage-collection Pod recorded (podsRecouped), so the workflow controller would act on forceFinalizerRemoval.
func scenarioFailedWorkflow(t *testing.T, env *testenv.Env, ns string) *unstructured.Unstructured {
	ctx := context.Background()
	wf := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
		"metadata": map[string]interface{}{"name": "nightly", "namespace": ns, "finalizers": []interface{}{kube.ArtifactGCFinalizer}},
		"spec": map[string]interface{}{"entrypoint": "main",
			"templates":  []interface{}{map[string]interface{}{"name": "main", "container": map[string]interface{}{"image": "busybox"}}},
			"artifactGC": map[string]interface{}{"strategy": "OnWorkflowDeletion"}},
		// hand-written state: no Argo Workflows controller runs in this scanner test; a garbage-collection Pod is
		// recorded (podsRecouped) so the remedy applies (the real v3.5.10 state without one: internal/conformance/workflows).
		"status": map[string]interface{}{"phase": "Failed", "message": "child 'nightly-1' failed",
			"artifactGCStatus": map[string]interface{}{"podsRecouped": map[string]interface{}{"nightly-artgc-wfdel-2166136261": true}}},
	}}
	res := env.Dynamic.Resource(workflowsGVR).Namespace(ns)
	created, err := res.Create(ctx, wf, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, res.Delete(ctx, created.GetName(), metav1.DeleteOptions{}))
	return created
}

func TestScannerDetectsTheClusterScenariosOnTheAPIServer(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	job := scenarioStuckJob(t, env, ns)
	webhook := scenarioOrphanWebhook(t, env, ns)
	wf := scenarioFailedWorkflow(t, env, ns)

	// Thresholds of a few seconds: the findings appear only when the scanner's own timer passes them.
	th := kube.Thresholds{Terminating: 2 * time.Second, WebhookBackend: 2 * time.Second, ArtifactGC: 2 * time.Second}
	s, err := kube.NewScanner(kube.ScannerOptions{Config: env.Config, Cluster: "e2e", Thresholds: th})
	require.NoError(t, err)
	require.Contains(t, s.Watched(), workflowsGVR.String())
	sink := &latestSink{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, sink) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	tests := []struct {
		name      string
		rule      syncmedic.RuleID
		namespace string
		object    string
	}{
		{name: "the Job held by a finalizer is stuck terminating", rule: syncmedic.RuleStuckTerminating, namespace: ns, object: job.Name},
		{name: "the webhook whose Service was deleted has no backend", rule: syncmedic.RuleWebhookBackendMissing, object: webhook.Name},
		{name: "the failed Workflow is held by the artifact-gc finalizer", rule: syncmedic.RuleArtifactGCFinalizerStuck, namespace: ns, object: wf.GetName()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Eventually(t, func() bool { _, ok := sink.find(tt.rule, tt.namespace, tt.object); return ok }, 30*time.Second, 20*time.Millisecond)
		})
	}
	sink.mu.Lock()
	require.Equal(t, "kube/e2e", sink.subject)
	sink.mu.Unlock()
	_, shadowed := sink.find(syncmedic.RuleStuckTerminating, ns, wf.GetName())
	require.False(t, shadowed, "the Workflow is explained by the specific rule, not reported twice")

	t.Run("the Workflow remedy sets forceFinalizerRemoval once, and not in dry-run", func(t *testing.T) {
		f, ok := sink.find(syncmedic.RuleArtifactGCFinalizerStuck, ns, wf.GetName())
		require.True(t, ok)
		r := kube.NewWorkflowRemedier(env.Dynamic)
		force := func() bool {
			live, err := env.Dynamic.Resource(workflowsGVR).Namespace(ns).Get(context.Background(), wf.GetName(), metav1.GetOptions{})
			require.NoError(t, err)
			v, _, _ := unstructured.NestedBool(live.Object, "spec", "artifactGC", "forceFinalizerRemoval")
			return v
		}
		out, err := r.Remediate(context.Background(), f, true)
		require.NoError(t, err)
		require.False(t, out.Changed)
		require.Contains(t, out.Steps[0], "would PATCH")
		require.False(t, force())

		out, err = r.Remediate(context.Background(), f, false)
		require.NoError(t, err)
		require.True(t, out.Changed)
		require.True(t, force())

		out, err = r.Remediate(context.Background(), f, false)
		require.NoError(t, err)
		require.False(t, out.Changed, "idempotent")
	})

	t.Run("a stale finding is refused once the live Workflow has no garbage-collection Pod recorded", func(t *testing.T) {
		f, ok := sink.find(syncmedic.RuleArtifactGCFinalizerStuck, ns, wf.GetName())
		require.True(t, ok)
		wfs := env.Dynamic.Resource(workflowsGVR).Namespace(ns)
		// hand-written state: the Workflow as v3.5.10 leaves it (no garbage-collection Pod), forceFinalizerRemoval
		// unset again; no workflow controller runs here.
		_, err := wfs.Patch(context.Background(), wf.GetName(), types.MergePatchType,
			[]byte(`{"spec":{"artifactGC":{"forceFinalizerRemoval":null}},"status":{"artifactGCStatus":{"podsRecouped":null}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		before, err := wfs.Get(context.Background(), wf.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		for _, dryRun := range []bool{true, false} {
			out, err := kube.NewWorkflowRemedier(env.Dynamic).Remediate(context.Background(), f, dryRun)
			require.Error(t, err)
			require.True(t, syncmedic.IsPermanent(err))
			require.Contains(t, err.Error(), "podsRecouped is empty")
			require.False(t, out.Changed)
		}
		after, err := wfs.Get(context.Background(), wf.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "nothing written")
	})

	t.Run("a Workflow an Argo CD app manages is not patched behind Argo CD's back", func(t *testing.T) {
		f, _ := sink.find(syncmedic.RuleArtifactGCFinalizerStuck, ns, wf.GetName())
		f.Remedy.Params = map[string]string{"app": "nightly-jobs", "namespace": ns, "name": wf.GetName()}
		_, err := kube.NewWorkflowRemedier(env.Dynamic).Remediate(context.Background(), f, false)
		require.Error(t, err)
		require.True(t, syncmedic.IsPermanent(err))
	})
}

// createFailingWebhook creates a ValidatingWebhookConfiguration named name with one webhook hook, failurePolicy Fail,
// calling Service ns/webhook on ConfigMap creations in the namespaces labelled for ns, and deletes it when the test
// ends.
func createFailingWebhook(t *testing.T, env *testenv.Env, ns, name, hook string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	ctx := context.Background()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    hook,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "webhook"}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"syncmedic-test-webhook": ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
		}}}
	require.NoError(t, env.Client.Create(ctx, cfg))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cfg) })
	return cfg
}
