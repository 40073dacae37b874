package kube_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/kube"
)

// rejectName is the ConfigMap name the test's admission webhook denies, so a denial proves the apiserver called it.
const rejectName = "rejected-by-webhook"

// admissionBackend is a real validating admission webhook served by the test over TLS on an address of this host:
// it admits every ConfigMap but rejectName, and counts the reviews the apiserver sent it.
type admissionBackend struct {
	srv     *http.Server
	port    int
	reviews atomic.Int64
}

// serveAdmission starts an admissionBackend on ip (port chosen by the system) with cert; Stop ends it.
func serveAdmission(t *testing.T, ip net.IP, cert tls.Certificate) *admissionBackend {
	t.Helper()
	b := &admissionBackend{}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", b.review)
	l, err := tls.Listen("tcp", net.JoinHostPort(ip.String(), "0"), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	b.port = l.Addr().(*net.TCPAddr).Port
	b.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = b.srv.Serve(l) }()
	t.Cleanup(b.Stop)
	return b
}

// Stop closes the backend's listener and connections: the apiserver's calls then fail.
func (b *admissionBackend) Stop() { _ = b.srv.Close() }

func (b *admissionBackend) review(w http.ResponseWriter, r *http.Request) {
	var rev admissionv1.AdmissionReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&rev); err != nil || rev.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	b.reviews.Add(1)
	resp := &admissionv1.AdmissionResponse{UID: rev.Request.UID, Allowed: rev.Request.Name != rejectName}
	if !resp.Allowed {
		resp.Result = &metav1.Status{Message: "denied by the syncmedic test webhook"}
	}
	rev.Response, rev.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rev)
}

// hostIP is an IPv4 address of this host other than loopback: the apiserver refuses loopback addresses in
// Endpoints ("may not be in the loopback range"), so the webhook listens on the host's own interface.
func hostIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.To4()
		}
	}
	t.Fatalf("no non-loopback IPv4 address on this host to serve the webhook on (interfaces: %v)", addrs)
	return nil
}

// webhookBackend is a Service without selector in front of an admissionBackend, with the Endpoints the apiserver
// resolves it through (--enable-aggregator-routing) and the EndpointSlice the endpointslice controller would mirror
// from them (no controller runs here), both written by the test.
type webhookBackend struct {
	env  *testenv.Env
	ns   string
	name string
	ip   net.IP
}

// create makes the Service (port 443 to port) and points its endpoints at port, ready.
func (w webhookBackend) create(t *testing.T, port int) {
	t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: w.ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(port))}}}}
	require.NoError(t, w.env.Client.Create(ctx, svc))
	require.NoError(t, w.env.Client.Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: w.ns}}))
	require.NoError(t, w.env.Client.Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: w.name + "-1", Namespace: w.ns,
		Labels: map[string]string{discoveryv1.LabelServiceName: w.name, discoveryv1.LabelManagedBy: "endpointslicemirroring-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4}))
	w.point(t, port, true)
}

// point rewrites the endpoints: ready at port, or (ready false) the address left not ready, as during a rollout or
// once the backend is gone.
func (w webhookBackend) point(t *testing.T, port int, ready bool) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: w.ns, Name: w.name}
	ep := &corev1.Endpoints{}
	require.NoError(t, w.env.Client.Get(ctx, key, ep))
	addr := []corev1.EndpointAddress{{IP: w.ip.String()}}
	subset := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Name: "https", Port: int32(port)}}}
	if ready {
		subset.Addresses = addr
	} else {
		subset.NotReadyAddresses = addr
	}
	ep.Subsets = []corev1.EndpointSubset{subset}
	require.NoError(t, w.env.Client.Update(ctx, ep))
	slice := &discoveryv1.EndpointSlice{}
	require.NoError(t, w.env.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name + "-1"}, slice))
	slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{w.ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}}
	slice.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port))}}
	require.NoError(t, w.env.Client.Update(ctx, slice))
}

// realWebhook registers a ValidatingWebhookConfiguration (failurePolicy Fail) for ConfigMap creations in namespace
// ns whose clientConfig is the Service backend.name, trusting caPEM; owner, when set, is a controller owner
// reference to that Namespace (the Knative shape).
func realWebhook(t *testing.T, env *testenv.Env, name string, backend webhookBackend, caPEM []byte, owner *corev1.Namespace) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: caPEM,
				Service: &admissionregistrationv1.ServiceReference{Namespace: backend.ns, Name: backend.name, Path: ptr.To("/validate"), Port: ptr.To[int32](443)}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: backend.ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
		}}}
	if owner != nil {
		cfg.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: owner.Name, UID: owner.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
	require.NoError(t, env.Client.Create(context.Background(), cfg))
	return cfg
}

// createConfigMap creates a ConfigMap in ns through the apiserver, which calls the namespace's webhooks.
func createConfigMap(env *testenv.Env, ns, name string) error {
	return env.Client.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
}

// webhookFindings returns the findings of rule about configuration name in fs.
func webhookFindings(fs []syncmedic.Finding, rule syncmedic.RuleID, name string) []syncmedic.Finding {
	var out []syncmedic.Finding
	for _, f := range fs {
		if f.Rule == rule && f.Object.Name == name {
			out = append(out, f)
		}
	}
	return out
}

// TestWebhookRulesAgainstARealAdmissionWebhook runs the cluster checks against admission webhooks the real
// kube-apiserver calls: validating webhooks served by the test over TLS (a CA of its own in the caBundle), reached
// through a `service` clientConfig — a Service without selector whose Endpoints point at this host's address, which
// the apiserver follows with --enable-aggregator-routing (without it, it dials the ClusterIP, which nothing routes
// here). Two configurations in a namespace of their own: "plain", whose backend is stopped later, and "owned",
// controlled by its Namespace (the Knative shape), whose backend stays up. The apiserver's own answers prove each
// state: writes admitted or denied by the webhook while it is up, rejected with "failed calling webhook" once it is
// gone.
//   - backend up, every object older than the threshold: no webhook-backend-missing; the same evaluations report
//     owned as kube/webhook-namespace-owned, and only that (the scanner read the configurations);
//   - plain's backend restarts (its endpoints not ready, the server down) and is back within half the threshold: not
//     reported, though the configuration is far older than the threshold;
//   - plain's backend goes away for good (server stopped, endpoints not ready): not reported before the threshold
//     has passed since the EndpointSlice changed, then reported about plain alone, dated from that change.
func TestWebhookRulesAgainstARealAdmissionWebhook(t *testing.T) {
	env := testenv.KubePrivateEndpointRouting(t)
	ctx := context.Background()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "webhooks-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)}}
	require.NoError(t, env.Client.Create(ctx, nsObj))
	ns := nsObj.Name
	ip := hostIP(t)
	plain, owned := webhookBackend{env: env, ns: ns, name: "plain", ip: ip}, webhookBackend{env: env, ns: ns, name: "owned", ip: ip}
	plainCert, plainCA := testenv.ServingCert(t, []string{"plain." + ns + ".svc"})
	ownedCert, ownedCA := testenv.ServingCert(t, []string{"owned." + ns + ".svc"})
	plainSrv, ownedSrv := serveAdmission(t, ip, plainCert), serveAdmission(t, ip, ownedCert)
	plain.create(t, plainSrv.port)
	owned.create(t, ownedSrv.port)
	plainCfg := realWebhook(t, env, "plain."+ns+".example.com", plain, plainCA, nil)
	ownedCfg := realWebhook(t, env, "owned."+ns+".example.com", owned, ownedCA, nsObj)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), plainCfg)
		_ = env.Client.Delete(context.Background(), ownedCfg)
	})

	t.Run("the apiserver calls both webhooks through their Services", func(t *testing.T) {
		require.Eventually(t, func() bool { return createConfigMap(env, ns, "admitted") == nil }, 30*time.Second, 200*time.Millisecond,
			"the apiserver admits through both webhooks once it has their Endpoints")
		err := createConfigMap(env, ns, rejectName)
		require.ErrorContains(t, err, "denied by the syncmedic test webhook")
		require.Positive(t, plainSrv.reviews.Load(), "the apiserver called plain's backend")
		require.Positive(t, ownedSrv.reviews.Load(), "the apiserver called owned's backend")
	})

	const threshold = 10 * time.Second
	th := kube.Thresholds{Terminating: time.Hour, WebhookBackend: threshold, ArtifactGC: time.Hour}
	s, err := kube.NewScanner(kube.ScannerOptions{Config: env.Config, Cluster: "e2e", Thresholds: th})
	require.NoError(t, err)
	sink := &evaluations{}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx, sink) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	// evaluatedAfter triggers an evaluation and returns the first one that arrives after t.
	evaluatedAfter := func(t *testing.T, at time.Time) []syncmedic.Finding {
		t.Helper()
		s.Trigger("")
		var evals [][]syncmedic.Finding
		require.Eventually(t, func() bool { evals = sink.since(at); return len(evals) > 0 }, 10*time.Second, 20*time.Millisecond,
			"the scanner evaluates the cluster")
		return evals[0]
	}

	outer := t
	t.Run("with both backends up nothing is missing; the namespace-owned configuration is reported as such", func(t *testing.T) {
		require.Eventually(t, func() bool { return time.Since(plainCfg.CreationTimestamp.Time) > threshold+time.Second }, 3*threshold, 100*time.Millisecond)
		fs := evaluatedAfter(t, time.Now())
		require.Len(t, webhookFindings(fs, syncmedic.RuleWebhookNamespaceOwned, ownedCfg.Name), 1, "findings: %v", fs)
		require.Empty(t, webhookFindings(fs, syncmedic.RuleWebhookNamespaceOwned, plainCfg.Name), "plain has no owner")
		for _, all := range sink.since(time.Time{}) {
			require.Empty(t, webhookFindings(all, syncmedic.RuleWebhookBackendMissing, plainCfg.Name), "reported while its backend answered")
			require.Empty(t, webhookFindings(all, syncmedic.RuleWebhookBackendMissing, ownedCfg.Name), "reported while its backend answered")
		}
	})

	t.Run("a backend restarted within half the threshold is not reported", func(t *testing.T) {
		plainSrv.Stop()
		plain.point(t, plainSrv.port, false)
		restart := time.Now()
		require.Eventually(t, func() bool {
			err := createConfigMap(env, ns, "during-restart-"+strconv.FormatInt(time.Now().UnixNano(), 36))
			return containsFailedCall(err, plainCfg.Name)
		}, 10*time.Second, 200*time.Millisecond, "the apiserver rejects writes while the backend restarts")
		require.Empty(t, webhookFindings(evaluatedAfter(t, time.Now()), syncmedic.RuleWebhookBackendMissing, plainCfg.Name), "reported at once")
		time.Sleep(threshold/2 - time.Since(restart))
		plainSrv = serveAdmission(outer, ip, plainCert)
		plain.point(t, plainSrv.port, true)
		require.Eventually(t, func() bool {
			return createConfigMap(env, ns, "restarted-"+strconv.FormatInt(time.Now().UnixNano(), 36)) == nil
		},
			10*time.Second, 200*time.Millisecond, "the restarted backend admits again")
		back := time.Now()
		require.Eventually(t, func() bool { return time.Since(restart) > threshold+time.Second }, 2*threshold, 100*time.Millisecond)
		fs := evaluatedAfter(t, time.Now())
		require.Len(t, webhookFindings(fs, syncmedic.RuleWebhookNamespaceOwned, ownedCfg.Name), 1, "the scanner read the configurations: %v", fs)
		for _, all := range sink.since(restart) {
			require.Empty(t, webhookFindings(all, syncmedic.RuleWebhookBackendMissing, plainCfg.Name), "a restart shorter than the threshold was reported")
		}
		require.Positive(t, len(sink.since(back)), "evaluated once the backend was back")
	})

	t.Run("a backend gone for good is reported for its configuration alone, after the threshold counted from the EndpointSlice's change", func(t *testing.T) {
		// Let the configuration, the Service and its slice age well past the threshold first.
		time.Sleep(threshold)
		plainSrv.Stop()
		down := time.Now()
		plain.point(t, plainSrv.port, false)
		err := createConfigMap(env, ns, "after-outage")
		require.Error(t, err)
		require.True(t, containsFailedCall(err, plainCfg.Name), "the apiserver rejects writes the gone webhook matches: %v", err)
		for time.Since(down) < threshold/2 {
			require.Empty(t, webhookFindings(evaluatedAfter(t, time.Now()), syncmedic.RuleWebhookBackendMissing, plainCfg.Name),
				"reported before the threshold")
			time.Sleep(time.Second)
		}
		var got, last []syncmedic.Finding
		for deadline := time.Now().Add(3 * threshold); len(got) == 0 && time.Now().Before(deadline); time.Sleep(time.Second) {
			last = evaluatedAfter(t, time.Now())
			got = webhookFindings(last, syncmedic.RuleWebhookBackendMissing, plainCfg.Name)
		}
		require.Len(t, got, 1, "reported once the threshold has passed")
		f := got[0]
		require.GreaterOrEqual(t, time.Since(down), threshold-time.Second, "not before the threshold")
		require.WithinDuration(t, down, f.Since, 2*time.Second, "dated from the slice's change (managedFields keep whole seconds)")
		require.Contains(t, f.Summary, "Service "+ns+"/plain has no ready endpoints")
		var others []string
		for _, x := range last {
			if x.Rule == syncmedic.RuleWebhookBackendMissing || x.Rule == syncmedic.RuleWebhookNamespaceOwned {
				others = append(others, string(x.Rule)+" "+x.Object.Name)
			}
		}
		require.ElementsMatch(t, []string{string(syncmedic.RuleWebhookBackendMissing) + " " + plainCfg.Name,
			string(syncmedic.RuleWebhookNamespaceOwned) + " " + ownedCfg.Name}, others, "exactly plain is missing its backend")
		require.NoError(t, createConfigMap(env, "default", "elsewhere"), "writes the webhooks do not match still pass")
	})
}

// containsFailedCall reports whether err is the apiserver's rejection for failing to call webhook name.
func containsFailedCall(err error, name string) bool {
	return err != nil && strings.Contains(err.Error(), `failed calling webhook "`+name+`"`)
}
