package kube_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/kube"
)

// nodeBackend is an admission webhook backend Deployment "backend" (testenv.NodeWebhookImage, strategy Recreate, so
// a rollout leaves the Service without a ready endpoint for a moment) behind a Service of the same name, on the real
// node.
type nodeBackend struct {
	env *testenv.Env
	ns  string
}

const nodeBackendName = "backend"

// create makes the Secret with the serving key pair, the Deployment and the Service.
func (b nodeBackend) create(t *testing.T, image string, certPEM, keyPEM []byte) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": nodeBackendName}
	require.NoError(t, b.env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "backend-tls", Namespace: b.ns},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}))
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz",
		Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS}}, PeriodSeconds: 1,
		InitialDelaySeconds: 3} // a new Pod stays unready for 3 s at least: the scanner evaluates during every restart
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: nodeBackendName, Namespace: b.ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](2),
				Containers: []corev1.Container{{Name: "webhook", Image: image, ImagePullPolicy: corev1.PullNever,
					Ports:          []corev1.ContainerPort{{Name: "https", ContainerPort: 8443}},
					ReadinessProbe: probe,
					VolumeMounts:   []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}}}},
				Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "backend-tls"}}}},
			}}}}
	require.NoError(t, b.env.Client.Create(ctx, dep))
	require.NoError(t, b.env.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: nodeBackendName, Namespace: b.ns},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}}}))
}

// patch applies a strategic merge patch to the Deployment (a rollout, a scale).
func (b nodeBackend) patch(t *testing.T, patch string) {
	t.Helper()
	_, err := b.env.Clientset.AppsV1().Deployments(b.ns).Patch(context.Background(), nodeBackendName, types.StrategicMergePatchType,
		[]byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// readyEndpoints counts the ready endpoints of the Service's EndpointSlices.
func (b nodeBackend) readyEndpoints(t *testing.T) int {
	t.Helper()
	slices, err := b.env.Clientset.DiscoveryV1().EndpointSlices(b.ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + nodeBackendName})
	require.NoError(t, err)
	n := 0
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

// pemKeyPair encodes a testenv.ServingCert key pair as the PEM files of a kubernetes.io/tls Secret.
func pemKeyPair(t *testing.T, der [][]byte, key any) (certPEM, keyPEM []byte) {
	t.Helper()
	for _, c := range der {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c})...)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	require.True(t, ok, "testenv.ServingCert makes ECDSA keys")
	b, err := x509.MarshalECPrivateKey(ec)
	require.NoError(t, err)
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b})
}

// TestWebhookBackendPodOnTheRealNode drives the webhook rules with a real admission webhook backend: a Deployment
// whose Pod runs on the real node (testenv.RealNodeWhileUsed), behind a Service the node's kube-apiserver calls
// through its endpoints' addresses (--enable-aggregator-routing; its egress proxy dials the Pod's address inside
// the node's namespace: no kube-proxy routes a ClusterIP there), with the real endpoints and EndpointSlice
// controllers following the Pods. The configuration (failurePolicy Fail, ConfigMap creations in its namespace) is
// owned by its Namespace, so every evaluation that read it reports it as kube/webhook-namespace-owned.
//   - up: the apiserver admits and denies through the Pod; nothing is missing;
//   - rolled out (strategy Recreate: the old Pod goes before the new one is ready, the Service without a ready
//     endpoint meanwhile): a near miss, not reported within the threshold, though the configuration was read;
//   - scaled to zero: writes fail ("failed calling webhook"), and once the threshold has passed since the
//     EndpointSlice changed, kube/webhook-backend-missing is reported about this configuration, and nothing else;
//   - scaled back up, its Pod deleted: a near miss while the ReplicaSet replaces it (an evaluation runs while the
//     Service has no ready endpoint), and nothing once the new Pod is ready;
//   - its Deployment deleted: nothing before the threshold, then exactly kube/webhook-backend-missing about this
//     configuration, dated from when the scanner first saw the backend down (not the configuration's age nor the
//     earlier outage), and saying so.
//
// It is the package's only test on the node, and parallel so that it runs after the package's other tests: in
// `make test` another package holds the machine's one node when this one starts, and the other tests need not wait.
func TestWebhookBackendPodOnTheRealNode(t *testing.T) {
	t.Parallel()
	n := testenv.RealNodeWhileUsed(t)
	env := n.Env
	ctx := context.Background()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "webhook-node-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)}}
	require.NoError(t, env.Client.Create(ctx, nsObj))
	ns := nsObj.Name
	backend := nodeBackend{env: env, ns: ns}
	cert, caPEM := testenv.ServingCert(t, []string{nodeBackendName + "." + ns + ".svc"})
	certPEM, keyPEM := pemKeyPair(t, cert.Certificate, cert.PrivateKey)
	backend.create(t, n.WebhookImage(t), certPEM, keyPEM)
	cfg := realWebhook(t, env, nodeBackendName+"."+ns+".example.com",
		webhookBackend{env: env, ns: ns, name: nodeBackendName}, caPEM, nsObj)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cfg) })

	require.Eventually(t, func() bool { return createConfigMap(env, ns, "admitted") == nil }, 2*time.Minute, 200*time.Millisecond,
		"the apiserver admits through the webhook Pod once it is ready (kubelet log: %s)", n.KubeletLog)
	// The Service's endpoint was once seen gone for a moment right after the first admission ("no endpoints
	// available for service"): that says nothing about the denial, so a call that did not reach the Pod is retried.
	var denied error
	require.Eventually(t, func() bool {
		denied = createConfigMap(env, ns, rejectName)
		return denied == nil || !strings.Contains(denied.Error(), "no endpoints available")
	}, 30*time.Second, 200*time.Millisecond, "the webhook Pod stays an endpoint: %v", denied)
	require.ErrorContains(t, denied, "denied by the syncmedic test webhook on the node", "the apiserver called the Pod through the Service")

	const threshold = 15 * time.Second
	th := kube.Thresholds{Terminating: time.Hour, WebhookBackend: threshold, ArtifactGC: time.Hour}
	s, err := kube.NewScanner(kube.ScannerOptions{Config: env.Config, Cluster: "e2e", Thresholds: th})
	require.NoError(t, err)
	sink := &evaluations{}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx, sink) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	evaluatedAfter := func(t *testing.T, at time.Time) []syncmedic.Finding {
		t.Helper()
		s.Trigger("")
		var evals [][]syncmedic.Finding
		require.Eventually(t, func() bool { evals = sink.since(at); return len(evals) > 0 }, 10*time.Second, 20*time.Millisecond,
			"the scanner evaluates the cluster")
		return evals[0]
	}
	missing := func(fs []syncmedic.Finding) []syncmedic.Finding {
		return webhookFindings(fs, syncmedic.RuleWebhookBackendMissing, cfg.Name)
	}

	t.Run("a rollout whose new Pod is ready within the threshold is not reported", func(t *testing.T) {
		require.Eventually(t, func() bool { return time.Since(cfg.CreationTimestamp.Time) > threshold+time.Second }, 3*threshold, 100*time.Millisecond)
		fs := evaluatedAfter(t, time.Now())
		require.Len(t, webhookFindings(fs, syncmedic.RuleWebhookNamespaceOwned, cfg.Name), 1, "the scanner read the configuration: %v", fs)
		require.Empty(t, missing(fs), "reported while its backend answered")

		backend.patch(t, fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"syncmedic.test/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano)))
		rollout := time.Now()
		require.Eventually(t, func() bool { return backend.readyEndpoints(t) == 0 }, time.Minute, 20*time.Millisecond,
			"the Recreate rollout leaves the Service without a ready endpoint")
		gap := time.Now()
		require.Eventually(t, func() bool { return backend.readyEndpoints(t) == 1 }, 2*time.Minute, 100*time.Millisecond,
			"the new Pod becomes ready")
		back := time.Since(gap)
		require.Eventually(t, func() bool {
			return createConfigMap(env, ns, "rolled-out-"+strconv.FormatInt(time.Now().UnixNano(), 36)) == nil
		}, 30*time.Second, 200*time.Millisecond, "the new Pod admits")
		require.Less(t, back, threshold, "the rollout must end within the threshold for this near miss")
		require.Eventually(t, func() bool { return time.Since(rollout) > threshold+2*time.Second }, 2*threshold, 100*time.Millisecond)
		fs = evaluatedAfter(t, time.Now())
		require.Len(t, webhookFindings(fs, syncmedic.RuleWebhookNamespaceOwned, cfg.Name), 1, "the scanner read the configuration after the rollout: %v", fs)
		evals := sink.since(rollout)
		require.Greater(t, len(evals), 1, "evaluated during and after the rollout")
		for _, all := range evals {
			require.Empty(t, missing(all), "a rollout shorter than the threshold (endpoints back after %s) was reported", back)
		}
		t.Logf("rollout: no ready endpoint for %s", back)
	})

	var scaledDown time.Time // when the scale to zero's finding dates the outage from
	t.Run("scaled to zero, its configuration alone is reported after the threshold", func(t *testing.T) {
		backend.patch(t, `{"spec":{"replicas":0}}`)
		down := time.Now()
		require.Eventually(t, func() bool { return backend.readyEndpoints(t) == 0 }, time.Minute, 100*time.Millisecond,
			"the Service loses its endpoint")
		require.Eventually(t, func() bool {
			return containsFailedCall(createConfigMap(env, ns, "scaled-down-"+strconv.FormatInt(time.Now().UnixNano(), 36)), cfg.Name)
		}, 30*time.Second, 200*time.Millisecond, "the apiserver rejects the writes the webhook matches")
		for time.Since(down) < threshold/2 {
			require.Empty(t, missing(evaluatedAfter(t, time.Now())), "reported before the threshold")
			time.Sleep(time.Second)
		}
		var got, last []syncmedic.Finding
		for deadline := time.Now().Add(3 * threshold); len(got) == 0 && time.Now().Before(deadline); time.Sleep(time.Second) {
			last = evaluatedAfter(t, time.Now())
			got = missing(last)
		}
		require.Len(t, got, 1, "reported once the threshold has passed")
		f := got[0]
		require.GreaterOrEqual(t, time.Since(down), threshold-time.Second, "not before the threshold")
		require.WithinDuration(t, down, f.Since, 10*time.Second, "dated from the EndpointSlice's change")
		require.Contains(t, f.Summary, "Service "+ns+"/"+nodeBackendName+" has no ready endpoints")
		var all []string
		for _, x := range last {
			all = append(all, string(x.Rule)+" "+x.Object.Name)
		}
		require.ElementsMatch(t, []string{string(syncmedic.RuleWebhookBackendMissing) + " " + cfg.Name,
			string(syncmedic.RuleWebhookNamespaceOwned) + " " + cfg.Name}, all, "exactly this configuration, and nothing else")
		scaledDown = f.Since
	})

	t.Run("scaled back up, its Pod deleted: silent while the ReplicaSet replaces it, though evaluated meanwhile", func(t *testing.T) {
		backend.patch(t, `{"spec":{"replicas":1}}`)
		require.Eventually(t, func() bool { return backend.readyEndpoints(t) == 1 }, 2*time.Minute, 100*time.Millisecond, "the backend is back")
		fs := evaluatedAfter(t, time.Now())
		require.Empty(t, missing(fs), "a backend with a ready endpoint is not reported: %v", fs)

		pods, err := env.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + nodeBackendName})
		require.NoError(t, err)
		require.Len(t, pods.Items, 1, "one backend Pod")
		require.NoError(t, env.Clientset.CoreV1().Pods(ns).Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}))
		deleted := time.Now()
		require.Eventually(t, func() bool { return backend.readyEndpoints(t) == 0 }, time.Minute, 20*time.Millisecond,
			"the deleted Pod leaves the Service without a ready endpoint")
		fs = evaluatedAfter(t, time.Now())
		require.Zero(t, backend.readyEndpoints(t), "the evaluation ran while the Service had no ready endpoint (the replacement was ready too soon)")
		require.Len(t, webhookFindings(fs, syncmedic.RuleWebhookNamespaceOwned, cfg.Name), 1, "the scanner read the configuration during the restart: %v", fs)
		require.Empty(t, missing(fs), "reported during the restart")

		require.Eventually(t, func() bool { return backend.readyEndpoints(t) == 1 }, 2*time.Minute, 100*time.Millisecond, "the replacement Pod becomes ready")
		back := time.Since(deleted)
		require.Less(t, back, threshold, "the restart must end within the threshold for this near miss")
		require.Eventually(t, func() bool { return time.Since(deleted) > threshold+2*time.Second }, 2*threshold, 100*time.Millisecond)
		fs = evaluatedAfter(t, time.Now())
		require.Len(t, webhookFindings(fs, syncmedic.RuleWebhookNamespaceOwned, cfg.Name), 1, "the scanner read the configuration after the restart: %v", fs)
		for _, all := range sink.since(deleted) {
			require.Empty(t, missing(all), "a Pod restart shorter than the threshold (ready again after %s) was reported", back)
		}
		t.Logf("Pod restart: ready again after %s", back)
	})

	t.Run("its Deployment deleted: reported after the threshold, dated from when the scanner first saw it down", func(t *testing.T) {
		require.NoError(t, env.Clientset.AppsV1().Deployments(ns).Delete(ctx, nodeBackendName, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
		deleted := time.Now()
		require.Eventually(t, func() bool { return backend.readyEndpoints(t) == 0 }, time.Minute, 20*time.Millisecond,
			"the garbage collector deletes the Pod, and the Service has no ready endpoint")
		down := time.Now()
		for time.Since(deleted) < threshold/2 {
			fs := evaluatedAfter(t, time.Now())
			require.Len(t, webhookFindings(fs, syncmedic.RuleWebhookNamespaceOwned, cfg.Name), 1, "the scanner read the configuration: %v", fs)
			require.Empty(t, missing(fs), "reported before the threshold")
			time.Sleep(time.Second)
		}
		var got, last []syncmedic.Finding
		for deadline := time.Now().Add(3 * threshold); len(got) == 0 && time.Now().Before(deadline); time.Sleep(time.Second) {
			last = evaluatedAfter(t, time.Now())
			got = missing(last)
		}
		require.Len(t, got, 1, "reported once the threshold has passed")
		f := got[0]
		require.GreaterOrEqual(t, time.Since(deleted), threshold, "not before the threshold")
		require.False(t, f.Since.Before(deleted), "dated from this outage (%s), not the configuration's creation (%s) nor the scale to zero's (%s)", f.Since, cfg.CreationTimestamp.Time, scaledDown)
		require.False(t, f.Since.After(down.Add(2*time.Second)), "dated from when the scanner first saw it down (%s), around %s", f.Since, down)
		since, ok := findingEvidence(f, "since")
		require.True(t, ok, "the finding says since when: %v", f.Evidence)
		at := f.Since.UTC().Format(time.RFC3339)
		require.True(t, strings.HasPrefix(since.Value, at+", from first seen down by this scanner at "+at+" (up at its evaluation of "),
			"the finding names its evidence: %q", since.Value)
		require.Contains(t, f.Summary, "Service "+ns+"/"+nodeBackendName+" has no ready endpoints")
		var all []string
		for _, x := range last {
			all = append(all, string(x.Rule)+" "+x.Object.Name)
		}
		require.ElementsMatch(t, []string{string(syncmedic.RuleWebhookBackendMissing) + " " + cfg.Name,
			string(syncmedic.RuleWebhookNamespaceOwned) + " " + cfg.Name}, all, "exactly this configuration, and nothing else")
	})
}

// findingEvidence is f's evidence named field, if it has one.
func findingEvidence(f syncmedic.Finding, field string) (syncmedic.Evidence, bool) {
	for _, e := range f.Evidence {
		if e.Field == field {
			return e, true
		}
	}
	return syncmedic.Evidence{}, false
}
