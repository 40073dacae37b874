package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/common"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// extensionComponent is the kustomize component that wires syncmedic into Argo CD as a proxy and UI extension.
var extensionComponent = filepath.Join("..", "..", "manifests", "components", "argocd-extension")

// uiServe is a running `syncmedic serve` with the incident API on, fed by the test apiserver's cluster checks.
type uiServe struct {
	Base  string // http://127.0.0.1:port
	Token string // the API token
	Logs  *testenv.LockedBuffer
}

// startUIServe runs serve against env with the incident API on and short cluster-check thresholds, until the test
// ends.
func startUIServe(t *testing.T, env *testenv.Env) *uiServe {
	t.Helper()
	token := testToken("api-" + strings.ReplaceAll(t.Name(), "/", "-"))
	r := startServe(t, "--kubeconfig", env.Kubeconfig,
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--api-token-file", writeFile(t, "api-token", token+"\n"), "--proxy-token-file", writeFile(t, "proxy-token", proxyTokenOf(token)),
		"--flux-watch=false", "--kube-stuck-kinds", "jobs.batch", "--terminating-threshold", "1s", "--kube-events=false")
	s := &uiServe{Base: r.Base, Token: token, Logs: r.Logs}
	t.Cleanup(func() { require.NotContains(t, s.Logs.String(), s.Token, "serve logged the API token") })
	return s
}

// apiIncidents calls the API at url with header and returns the status, the "namespace/name" of the listed objects
// and the body (status 0 and the error when the call fails: it runs inside Eventually).
func apiIncidents(url string, header http.Header) (int, []string, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err.Error()
	}
	req.Header = header
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err.Error()
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, err.Error()
	}
	if res.StatusCode != http.StatusOK {
		return res.StatusCode, nil, string(body)
	}
	var list ui.IncidentList
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, nil, err.Error() + ": " + string(body)
	}
	objects := []string{}
	for _, inc := range list.Items {
		objects = append(objects, inc.Object.Namespace+"/"+inc.Object.Name)
	}
	return res.StatusCode, objects, string(body)
}

// waitIncidents waits until serve lists an open incident about each of objects ("namespace/name").
func (s *uiServe) waitIncidents(t *testing.T, namespace string, objects ...string) {
	t.Helper()
	var last []string
	var body string
	if !assert.Eventually(t, func() bool {
		_, last, body = apiIncidents(s.Base+ui.IncidentsPath+"?namespace="+namespace, http.Header{"Authorization": {"Bearer " + s.Token}})
		for _, o := range objects {
			if !contains(last, o) {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond) {
		t.Fatalf("want incidents about %v, last answer: %s\nserve's log:\n%s", objects, body, s.Logs.String())
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// argoCDInstallWithExtension builds the extension component over a minimal Argo CD install (the ConfigMaps and the
// argocd-server Deployment it patches) with kustomize, and returns the resulting ConfigMaps' data by name (Argo CD's,
// not the component's own digest) and the argocd-server Deployment.
func argoCDInstallWithExtension(t *testing.T) (map[string]map[string]string, *unstructured.Unstructured) {
	t.Helper()
	dir := t.TempDir()
	comp, err := filepath.Abs(extensionComponent)
	require.NoError(t, err)
	rel, err := filepath.Rel(dir, comp)
	require.NoError(t, err)
	install := ""
	for _, name := range []string{"argocd-cm", "argocd-rbac-cm", "argocd-cmd-params-cm"} {
		install += fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  existing: kept\n---\n", name)
	}
	install += `apiVersion: apps/v1
kind: Deployment
metadata:
  name: argocd-server
spec:
  selector: {matchLabels: {app.kubernetes.io/name: argocd-server}}
  template:
    metadata: {labels: {app.kubernetes.io/name: argocd-server}}
    spec:
      containers:
        - name: argocd-server
          image: quay.io/argoproj/argocd:v2.14.21
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "install.yaml"), []byte(install), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: argocd\nresources: [install.yaml]\ncomponents: ["+rel+"]\n"), 0o644))
	objs, err := testenv.KustomizeBuild(dir)
	require.NoError(t, err)
	cms := map[string]map[string]string{}
	var server *unstructured.Unstructured
	for _, u := range objs {
		switch u.GetKind() {
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cm))
			if strings.HasPrefix(cm.Name, "syncmedic-extension-digest-") {
				continue // the component's own: the bundle's pinned digest
			}
			require.Equal(t, "kept", cm.Data["existing"], "the component must not replace %s's own settings", cm.Name)
			cms[cm.Name] = cm.Data
		case "Deployment":
			server = u
		}
	}
	return cms, server
}

// TestArgoCDProxyExtensionReachesTheIncidentAPI configures a real argocd-server with the extension component's
// settings and checks that it forwards an authenticated, authorized user's request to serve's incident API, scoped
// to the application the user is looking at, and refuses users without the RBAC line.
func TestArgoCDProxyExtensionReachesTheIncidentAPI(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	checkout, billing := ns+"-checkout", ns+"-billing"
	testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: "checkout-migrate", App: checkout})
	testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: "billing-migrate", App: billing})
	serve := startUIServe(t, env)
	serve.waitIncidents(t, ns, ns+"/checkout-migrate", ns+"/billing-migrate")

	cms, _ := argoCDInstallWithExtension(t)
	require.Equal(t, "true", cms["argocd-cmd-params-cm"]["server.enable.proxy.extension"])
	settings := map[string]string{}
	for k, v := range cms["argocd-cm"] {
		if strings.HasPrefix(k, "extension.config") {
			// The in-cluster Service name of the component, pointed at this test's serve.
			settings[k] = strings.ReplaceAll(v, "http://syncmedic.syncmedic.svc.cluster.local:9292", serve.Base)
		}
	}
	require.NotEmpty(t, settings, "the component sets no extension.config")
	var policy []string
	for k, v := range cms["argocd-rbac-cm"] {
		if strings.HasPrefix(k, "policy.") && strings.HasSuffix(k, ".csv") {
			policy = append(policy, strings.Split(strings.TrimSpace(v), "\n")...)
		}
	}
	require.Contains(t, policy, "p, role:readonly, extensions, invoke, syncmedic, allow")
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"alice", "bob"},
		// alice is a read-only user; bob may see every application but has no extensions line.
		Policy:         append(policy, "g, alice, role:readonly", "p, role:viewer, applications, get, */*, allow", "g, bob, role:viewer"),
		Settings:       settings,
		Secrets:        map[string]string{"syncmedic.proxy.authorization": "Bearer " + proxyTokenOf(serve.Token)},
		ProxyExtension: true,
	})
	argo.CreateApplication(t, argo.NewApplication(checkout, ns))
	argo.CreateApplication(t, argo.NewApplication(billing, ns))
	alice, bob := argo.Token(t, "alice"), argo.Token(t, "bob")

	viaArgoCD := func(token, app string) http.Header {
		h := http.Header{"Argocd-Application-Name": {argo.Namespace + ":" + app}, "Argocd-Project-Name": {"default"}}
		if token != "" {
			// The browser's session cookie: argocd-server authenticates extension requests by it alone.
			h.Set("Cookie", common.AuthCookieName+"="+token)
		}
		return h
	}
	url := "http://" + argo.Addr + "/extensions/syncmedic" + ui.IncidentsPath
	for _, tc := range []struct {
		name   string
		query  string
		header http.Header
		code   int
		want   []string
		says   string
	}{
		{"a user with the RBAC line sees the incidents of the application in the headers", "", viaArgoCD(alice, checkout), http.StatusOK, []string{ns + "/checkout-migrate"}, ""},
		{"the same user on another application sees that application's incidents", "", viaArgoCD(alice, billing), http.StatusOK, []string{ns + "/billing-migrate"}, ""},
		{"a query cannot widen the answer beyond the application", "?app=" + billing, viaArgoCD(alice, checkout), http.StatusOK, []string{}, ""},
		{"a user without the extensions line is refused by argocd-server", "", viaArgoCD(bob, checkout), http.StatusUnauthorized, nil, "Unauthorized extension request"},
		{"a request without an Argo CD session is refused by argocd-server", "", viaArgoCD("", checkout), http.StatusBadRequest, nil, "Auth cookie not found"},
		{"the API token itself is no Argo CD session", "", viaArgoCD(serve.Token, checkout), http.StatusUnauthorized, nil, "Invalid token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var code int
			var got []string
			var body string
			// argocd-server's settings and RBAC informers may lag its start by a moment.
			if !assert.Eventually(t, func() bool {
				code, got, body = apiIncidents(url+tc.query, tc.header)
				return code == tc.code
			}, 30*time.Second, 100*time.Millisecond) {
				t.Fatalf("last answer: %d %s", code, body)
			}
			if tc.want != nil {
				require.Equal(t, tc.want, got, body)
			}
			require.Contains(t, body, tc.says)
			require.NotContains(t, body, serve.Token)
		})
	}
}

// kustomizeBuild runs kustomize on a kustomization written into a new directory, with rel paths resolved from it.
func kustomizeBuild(t *testing.T, kustomization func(rel func(string) string) string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		abs, err := filepath.Abs(p)
		require.NoError(t, err)
		r, err := filepath.Rel(dir, abs)
		require.NoError(t, err)
		return r
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization(rel)), 0o644))
	out, err := testenv.KustomizeBuild(dir)
	require.NoError(t, err)
	return out
}

func TestArgoCDExtensionComponents(t *testing.T) {
	t.Run("the Argo CD side installs the UI extension into argocd-server's /tmp/extensions/", func(t *testing.T) {
		_, server := argoCDInstallWithExtension(t)
		initContainers, _, _ := unstructured.NestedSlice(server.Object, "spec", "template", "spec", "initContainers")
		require.Len(t, initContainers, 1)
		installer := initContainers[0].(map[string]any)
		require.Contains(t, fmt.Sprint(installer["env"]), "http://syncmedic.syncmedic.svc.cluster.local:9292"+ui.ExtensionArchivePath)
		containers, _, _ := unstructured.NestedSlice(server.Object, "spec", "template", "spec", "containers")
		require.Len(t, containers, 1, "the patch adds no container")
		require.Contains(t, fmt.Sprint(containers[0].(map[string]any)["volumeMounts"]), "/tmp/extensions/")
		require.Contains(t, fmt.Sprint(containers[0].(map[string]any)["image"]), "argocd", "the install's own container is kept")
	})
	t.Run("the syncmedic side turns the API on and lets argocd-server in", func(t *testing.T) {
		objs := kustomizeBuild(t, func(rel func(string) string) string {
			return "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + rel("../../manifests/base") +
				"]\ncomponents: [" + rel(filepath.Join(extensionComponent, "syncmedic")) + "]\n"
		})
		var env string
		var policy *unstructured.Unstructured
		for _, o := range objs {
			switch {
			case o.GetKind() == "Deployment" && o.GetName() == "syncmedic":
				containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				env = fmt.Sprint(containers[0].(map[string]any)["env"])
			case o.GetKind() == "NetworkPolicy" && o.GetName() == "syncmedic-argocd-extension":
				policy = o
			}
		}
		require.Contains(t, env, "SYNCMEDIC_API_TOKEN_FILE")
		require.Contains(t, env, "/etc/syncmedic/secrets/api-token")
		require.Contains(t, env, "name:SYNCMEDIC_PROXY_TOKEN_FILE value:/etc/syncmedic/secrets/proxy-token", "argocd-server's own token")
		require.Contains(t, env, "SYNCMEDIC_ARGOCD_SERVER", "the base's own variables are kept")
		require.NotNil(t, policy)
		require.Equal(t, "syncmedic", policy.GetNamespace())
		require.Contains(t, fmt.Sprint(policy.Object["spec"]), "argocd-server")
	})
}
