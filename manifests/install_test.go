package manifests

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxnc"
)

// buildSyncmedic builds the syncmedic command, the binary the image holds, into a temporary directory.
func buildSyncmedic(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "syncmedic")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/syncmedic")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/syncmedic: %s", out)
	return bin
}

// recreate deletes obj if it exists and creates it, so each case starts from the objects it describes.
func recreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		obj.SetResourceVersion("")
		err := c.Create(ctx, obj)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "creating %s/%s", obj.GetNamespace(), obj.GetName())
}

// pod is the syncmedic container of an installed Deployment, run as a local process the way the kubelet would run
// it (the test apiserver has no kubelet): its args and environment, ConfigMap and Secret references read from the
// apiserver, its Secret volumes written to directories that replace their mount paths, and the ServiceAccount's
// identity as its kubeconfig.
type pod struct {
	child  *testenv.Child
	listen string
	// metrics is where /metrics, /healthz and /readyz are: the Deployment's --metrics-addr, on another free port.
	metrics string
}

func runPod(t *testing.T, env *testenv.Env, exe string, d appsv1.Deployment) *pod {
	t.Helper()
	ctx := context.Background()
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	dirs := map[string]string{} // mount path → local directory
	for _, m := range c.VolumeMounts {
		dir := t.TempDir()
		dirs[m.MountPath] = dir
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			var s corev1.Secret
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: v.Secret.SecretName}, &s)
			if apierrors.IsNotFound(err) && v.Secret.Optional != nil && *v.Secret.Optional {
				continue // an optional volume of a missing Secret is an empty directory
			}
			require.NoError(t, err, "the Pod mounts the Secret %s", v.Secret.SecretName)
			for k, val := range s.Data {
				require.NoError(t, os.WriteFile(filepath.Join(dir, k), val, 0o600))
			}
		}
	}
	local := func(s string) string {
		for mount, dir := range dirs {
			if rest, ok := strings.CutPrefix(s, mount+"/"); ok {
				return filepath.Join(dir, rest)
			}
			if strings.Contains(s, "="+mount+"/") {
				return strings.Replace(s, "="+mount+"/", "="+dir+"/", 1)
			}
		}
		return s
	}
	port, err := freeLoopbackPort()
	require.NoError(t, err)
	metricsPort, err := freeLoopbackPort()
	require.NoError(t, err)
	p := &pod{listen: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), metrics: net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPort))}
	var args []string
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--listen="):
			a = "--listen=" + p.listen
		case strings.HasPrefix(a, "--metrics-addr="):
			a = "--metrics-addr=" + p.metrics
		}
		args = append(args, local(a))
	}
	require.Contains(t, args, "--metrics-addr="+p.metrics, "the Deployment serves /metrics and the probes apart from the API")
	sa := "system:serviceaccount:" + d.Namespace + ":" + spec.ServiceAccountName
	args = append(args, "--kubeconfig="+env.UserKubeconfig(t, sa, "system:serviceaccounts", "system:serviceaccounts:"+d.Namespace, "system:authenticated"))

	environ := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			environ = append(environ, e.Name+"="+local(e.Value))
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			environ = append(environ, e.Name+"="+d.Name+"-install-test")
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			var cm corev1.ConfigMap
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: ref.Name}, &cm)
			v, ok := cm.Data[ref.Key]
			if (apierrors.IsNotFound(err) || err == nil && !ok) && ref.Optional != nil && *ref.Optional {
				continue
			}
			require.NoError(t, err)
			require.True(t, ok, "ConfigMap %s has no key %s", ref.Name, ref.Key)
			environ = append(environ, e.Name+"="+local(v))
		default:
			t.Fatalf("the test cannot resolve the environment variable %s", e.Name)
		}
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = environ
	p.child, err = testenv.StartChild("syncmedic-"+d.Namespace, cmd, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(p.child.Stop)
	return p
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// get fetches a path of the Pod's metrics address (/metrics, /healthz, /readyz).
func (p *pod) get(path string) (int, string, error) {
	res, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + p.metrics + path)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// waitReady waits for /readyz to answer 200; it fails with the last answer and the process's log.
func (p *pod) waitReady(t *testing.T) {
	t.Helper()
	var last string
	ok := assertEventually(60*time.Second, func() bool {
		select {
		case <-p.child.Exited():
			last = "the process exited"
			return true
		default:
		}
		code, body, err := p.get("/readyz")
		last = fmt.Sprintf("%d %s %v", code, body, err)
		return code == http.StatusOK
	})
	select {
	case <-p.child.Exited():
		t.Fatalf("syncmedic exited:\n%s", p.child.Tail(40))
	default:
	}
	require.True(t, ok, "/readyz never answered 200 (last: %s); log:\n%s", last, p.child.Tail(40))
}

// assertEventually polls cond until it is true or timeout passes, and says which.
func assertEventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var acceptedEvents = regexp.MustCompile(`(?m)^syncmedic_events_received_total\{result="accepted"\} (\d+)`)

// fluxEventsReach sends HelmRelease events with Flux's own recorder to the real notification-controller, which
// forwards them through a generic-hmac Provider with token to the Pod's receiver, until the Pod counts one accepted.
func fluxEventsReach(t *testing.T, env *testenv.Env, nc *fluxnc.Controller, p *pod, token []byte) {
	t.Helper()
	ns := env.Namespace(t)
	fluxnc.ForwardHelmReleaseEvents(t, env.Client, ns, "http://"+p.listen+flux.EventsPath, token)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	recorder, err := events.NewRecorder(mgr, logr.FromSlogHandler(slog.DiscardHandler), nc.EventsURL(), "helm-controller")
	require.NoError(t, err)
	hr := &unstructured.Unstructured{}
	hr.SetAPIVersion("helm.toolkit.fluxcd.io/v2")
	hr.SetKind("HelmRelease")
	hr.SetNamespace(ns)
	hr.SetName("podinfo")
	accepted := func() int {
		_, body, err := p.get("/metrics")
		if err != nil {
			return 0
		}
		m := acceptedEvents.FindStringSubmatch(body)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	before := accepted()
	attempt := 0
	// The Alert reaches notification-controller's cache asynchronously: send distinct events until one arrives.
	ok := assertEventually(60*time.Second, func() bool {
		attempt++
		recorder.AnnotatedEventf(hr, map[string]string{"revision": "1.0.0"}, corev1.EventTypeNormal, "InstallSucceeded",
			"install test event %d", attempt)
		return accepted() > before
	})
	require.True(t, ok, "no signed event reached the receiver through notification-controller; syncmedic log:\n%s", p.child.Tail(20))
}

// TestTheInstallsComeUp installs the kustomize base and the Helm chart into the test apiserver (server-side apply),
// creates the Secrets and settings the README describes, points them at a real argocd-server — behind a
// self-signed certificate, in each of the three setups the README documents — runs the Pod's container with the
// ServiceAccount's identity, and sees it become ready and accept Flux's signed events from a real
// notification-controller.
func TestTheInstallsComeUp(t *testing.T) {
	env := testenv.Kube(t)
	exe := buildSyncmedic(t)
	var accounts []string
	for k, v := range componentConfigMap(t, "argocd-cm.yaml") {
		if name, ok := strings.CutPrefix(k, "accounts."); ok && v == "apiKey" {
			accounts = append(accounts, name)
		}
	}
	policy := strings.Split(strings.TrimSpace(componentConfigMap(t, "argocd-rbac-cm.yaml")["policy.syncmedic.csv"]), "\n")
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{Accounts: accounts, Policy: policy})
	argoToken := argo.Token(t, "syncmedic")
	argo.CreateApplication(t, argo.NewApplication("install-test", env.Namespace(t)))
	tlsAddr, caPEM := testenv.SelfSignedTLSFront(t, argo.Addr)
	nc := fluxnc.Start(t, env.Config, env.Kubeconfig)

	type setup struct {
		name     string
		settings map[string]string // syncmedic-settings of the base
		helm     []string          // values of the chart
	}
	setups := []setup{{
		name:     "CA file: the copy of argocd-server's self-signed certificate verifies it",
		settings: map[string]string{"argocd-server": tlsAddr, "argocd-ca-file": "/etc/syncmedic/argocd-ca/ca.crt"},
		helm:     []string{"argocd.server=" + tlsAddr}, // the chart's default argocd.tls.mode, ca
	}, {
		name:     "insecure: TLS without verifying the certificate",
		settings: map[string]string{"argocd-server": tlsAddr, "argocd-insecure": "true"},
		helm:     []string{"argocd.server=" + tlsAddr, "argocd.tls.mode=insecure"},
	}, {
		name:     "plaintext: plain gRPC to an argocd-server started with --insecure",
		settings: map[string]string{"argocd-server": argo.Addr, "argocd-plaintext": "true"},
		helm:     []string{"argocd.server=" + argo.Addr, "argocd.tls.mode=plaintext"},
	}}
	secrets := func(ns string) []client.Object {
		return []client.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "syncmedic-secrets", Namespace: ns},
				Data: map[string][]byte{"flux-hmac-token": []byte("install-test-" + ns), "argocd-token": []byte(argoToken + "\n")}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "syncmedic-argocd-ca", Namespace: ns},
				Data: map[string][]byte{"ca.crt": caPEM}},
		}
	}
	for _, s := range setups {
		t.Run("the kustomize base, "+s.name, func(t *testing.T) {
			objs := build(t, "base")
			apply(t, env.Client, objs)
			var d appsv1.Deployment
			convert(t, find(t, objs, "Deployment", "syncmedic"), &d)
			for _, o := range append(secrets(d.Namespace), &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "syncmedic-settings", Namespace: d.Namespace}, Data: s.settings}) {
				recreate(t, env.Client, o)
			}
			p := runPod(t, env, exe, d)
			p.waitReady(t)
			p.watchesApplications(t)
			fluxEventsReach(t, env, nc, p, []byte("install-test-"+d.Namespace))
		})
		t.Run("the Helm chart, "+s.name, func(t *testing.T) {
			ns := env.Namespace(t)
			for _, o := range secrets(ns) {
				recreate(t, env.Client, o)
			}
			// Another release name than the base's, so its ClusterRoleBinding does not take the base's over.
			objs := helmTemplate(t, "syncmedic-install", ns, append(s.helm, "secrets.existingSecret=syncmedic-secrets")...)
			apply(t, env.Client, objs)
			d := deployment(t, objs)
			p := runPod(t, env, exe, d)
			p.waitReady(t)
			p.watchesApplications(t)
			fluxEventsReach(t, env, nc, p, []byte("install-test-"+ns))
		})
	}

	t.Run("the control: without the CA the self-signed certificate is refused, naming the flags that fix it", func(t *testing.T) {
		objs := build(t, "base")
		apply(t, env.Client, objs)
		var d appsv1.Deployment
		convert(t, find(t, objs, "Deployment", "syncmedic"), &d)
		for _, o := range append(secrets(d.Namespace), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "syncmedic-settings", Namespace: d.Namespace}, Data: map[string]string{"argocd-server": tlsAddr}}) {
			recreate(t, env.Client, o)
		}
		p := runPod(t, env, exe, d)
		var said string
		ok := assertEventually(60*time.Second, func() bool {
			_, body, _ := p.get("/readyz")
			said = body + "\n" + p.child.Tail(40)
			return strings.Contains(said, "--argocd-ca-file")
		})
		require.True(t, ok, "neither /readyz nor the log names --argocd-ca-file:\n%s", said)
		code, _, _ := p.get("/readyz")
		require.NotEqual(t, http.StatusOK, code, "ready without trusting argocd-server")
	})
}

var watchedApplications = regexp.MustCompile(`(?m)^syncmedic_argocd_applications(?:\{[^}]*\})? (\d+)`)

// watchesApplications waits until the Pod's Argo CD watch counts the test's Application: it reached argocd-server
// with its token through the configured transport.
func (p *pod) watchesApplications(t *testing.T) {
	t.Helper()
	var last string
	ok := assertEventually(60*time.Second, func() bool {
		_, body, err := p.get("/metrics")
		if err != nil {
			return false
		}
		m := watchedApplications.FindStringSubmatch(body)
		if m == nil {
			return false
		}
		last = m[0]
		n, _ := strconv.Atoi(m[1])
		return n >= 1
	})
	require.True(t, ok, "the Argo CD watch never saw the Application (last: %q); log:\n%s", last, p.child.Tail(20))
}
