package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/kube"
)

// evaluations records every evaluation the scanner reports, with when it arrived.
type evaluations struct {
	latestSink
	at []time.Time
	fs [][]syncmedic.Finding
}

func (e *evaluations) Observe(ctx context.Context, subject string, fs []syncmedic.Finding) {
	e.latestSink.Observe(ctx, subject, fs)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.at, e.fs = append(e.at, time.Now()), append(e.fs, fs)
}

// since returns the evaluations that arrived after t.
func (e *evaluations) since(t time.Time) [][]syncmedic.Finding {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out [][]syncmedic.Finding
	for i, at := range e.at {
		if at.After(t) {
			out = append(out, e.fs[i])
		}
	}
	return out
}

func hookJob(ns, name string, finalizers ...string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: finalizers,
		Annotations: map[string]string{"argocd.argoproj.io/hook": "PreSync", "argocd.argoproj.io/hook-delete-policy": "BeforeHookCreation"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: name, Image: "busybox"}}}}}}
}

// TestTheScannerLeavesArgoCDsStatesToArgoCDAndDatesABackendFromItsOutage runs the live scanner against the real
// apiserver on two states the generic rules used to misread:
//   - a deleted hook Job held only by argocd.argoproj.io/hook-finalizer, as a v3 wave keeps a finished TTL hook while
//     its slow hook runs: argocd/hook-finalizer-stuck's to judge, so kube/stuck-terminating stays silent; a sibling
//     hook also held by a foreign finalizer is reported, for that finalizer only (proof the scanner saw both);
//   - a webhook whose long-ready backend goes unready (its EndpointSlice rewritten without the trigger-time
//     annotation, as the endpoints controller leaves it when a rollout deletes the ready Pod): not reported at once
//     from the slice's creation, but once the threshold has passed since the slice's change, dated from it.
func TestTheScannerLeavesArgoCDsStatesToArgoCDAndDatesABackendFromItsOutage(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	ctx := context.Background()

	held := hookJob(ns, "migrate-4f2a9c1-presync-1773144000", "argocd.argoproj.io/hook-finalizer")
	both := hookJob(ns, "seed-4f2a9c1-presync-1773144000", "argocd.argoproj.io/hook-finalizer", "example.com/cleanup")
	for _, j := range []*batchv1.Job{held, both} {
		require.NoError(t, env.Client.Create(ctx, j))
		// Background propagation: the default for a batch/v1 Job is "orphan", whose finalizer only the garbage
		// collector (not running on this apiserver) removes; a real cluster is left with the hook finalizer alone.
		require.NoError(t, env.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}
	require.NoError(t, env.Client.Create(ctx, svc))
	// The apiserver here runs no endpointslice controller: the test writes the slice the way that controller does
	// (the endpoints of the Service's Pods, labelled with the Service's name).
	eps := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "webhook-x7k2p", Namespace: ns,
		Labels: map[string]string{discoveryv1.LabelServiceName: "webhook", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "webhook-5d8f7-abcde"}}}}
	require.NoError(t, env.Client.Create(ctx, eps))
	cfg := createFailingWebhook(t, env, ns, "rollout."+ns, "rollout.webhook.example.com")

	const threshold = 8 * time.Second
	th := kube.Thresholds{Terminating: time.Second, WebhookBackend: threshold, ArtifactGC: time.Second}
	s, err := kube.NewScanner(kube.ScannerOptions{Config: env.Config, Cluster: "e2e", Thresholds: th, ArgoCDRulesRun: true})
	require.NoError(t, err)
	sink := &evaluations{}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx, sink) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	t.Run("a hook held only by the hook finalizer is left to hook-finalizer-stuck; the sibling is reported for its other finalizer", func(t *testing.T) {
		require.Eventually(t, func() bool { _, ok := sink.find(syncmedic.RuleStuckTerminating, ns, both.Name); return ok }, 30*time.Second, 20*time.Millisecond)
		f, _ := sink.find(syncmedic.RuleStuckTerminating, ns, both.Name)
		require.True(t, strings.HasSuffix(f.Summary, "held by example.com/cleanup"), f.Summary)
		_, reported := sink.find(syncmedic.RuleStuckTerminating, ns, held.Name)
		require.False(t, reported, "the evaluation that reports its sibling, deleted at the same time, leaves it alone")
	})

	// Let every object grow older than the threshold while the backend is healthy: a date taken from the slice's or
	// the configuration's creation would now report the outage the moment it starts.
	require.Eventually(t, func() bool { return time.Since(cfg.CreationTimestamp.Time) > threshold+time.Second }, 2*threshold, 100*time.Millisecond)
	require.Empty(t, backendFindings(sink.since(time.Time{}), cfg.Name), "reported while its backend was ready")

	// The rollout: the only ready Pod goes, the slice is rewritten with no ready endpoint and without the
	// annotation. (Written by the test as the endpointslice controller would; see above.)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(eps), eps))
	eps.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "webhook-6c9b4-fghij"}}}
	down := time.Now()
	require.NoError(t, env.Client.Update(ctx, eps))

	t.Run("the backend that went unready is not reported before the threshold has passed since its slice changed", func(t *testing.T) {
		require.Never(t, func() bool {
			_, ok := sink.find(syncmedic.RuleWebhookBackendMissing, "", cfg.Name)
			return ok
		}, threshold/2, 100*time.Millisecond)
		s.Trigger("")
		require.Eventually(t, func() bool { return len(sink.since(down.Add(threshold/2))) > 0 }, 10*time.Second, 20*time.Millisecond,
			"the scanner evaluated the outage")
		require.Empty(t, backendFindings(sink.since(down), cfg.Name), "reported at once")
	})

	t.Run("once the threshold has passed it is reported, dated from the slice's change", func(t *testing.T) {
		var f syncmedic.Finding
		require.Eventually(t, func() bool {
			var ok bool
			f, ok = sink.find(syncmedic.RuleWebhookBackendMissing, "", cfg.Name)
			return ok
		}, 3*threshold, 50*time.Millisecond)
		require.GreaterOrEqual(t, time.Since(down), threshold-time.Second, "not before the threshold")
		require.WithinDuration(t, down, f.Since, 2*time.Second, "dated from the change (managedFields keep whole seconds)")
		require.Contains(t, f.Summary, "Service "+ns+"/webhook has no ready endpoints")
	})
}

// backendFindings returns the webhook-backend-missing findings about configuration name among evaluations.
func backendFindings(evals [][]syncmedic.Finding, name string) []syncmedic.Finding {
	var out []syncmedic.Finding
	for _, fs := range evals {
		for _, f := range fs {
			if f.Rule == syncmedic.RuleWebhookBackendMissing && f.Object.Name == name {
				out = append(out, f)
			}
		}
	}
	return out
}
