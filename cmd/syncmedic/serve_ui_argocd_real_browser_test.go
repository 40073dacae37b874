// The tests in this file need Argo CD's own web UI, built by `make tools-argocd-ui` (part of `make tools`) from the Go
// modules' ui/ sources and the argo-ui repository vendored in internal/testenv/argoui.

package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// realUIFixPolicy reports a held hook finalizer and lets the Argo CD user alice (not bob) fix it on demand.
const realUIFixPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: notify, threshold: 1s, fixBy: ["user:alice"]}
`

// installExtensionArchive does what Argo CD's extension installer (the component's init container) does with
// serve's GET /ui/extension.tar: it unpacks it into dir, argocd-server's /tmp/extensions/.
func installExtensionArchive(t *testing.T, base, dir string) {
	t.Helper()
	res, err := http.Get(base + ui.ExtensionArchivePath)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	tr := tar.NewReader(res.Body)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(t, err)
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		require.True(t, strings.HasPrefix(p, dir+string(filepath.Separator)), "archive entry %q leaves the directory", hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, 0o755))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}
	}
}

// realUILogin signs user in on the real Argo CD login page of base.
func realUILogin(b *testenv.Browser, base, user, password string) {
	b.Open(base + "/login")
	b.Type(`.login__box input:not([type=password])`, user)
	b.Type(`.login__box input[type=password]`, password)
	b.Click(`.login__box button[type=submit]`)
	b.WaitText("Applications")
}

// incidentLines returns each "<rule> · <object>" line the extension rendered in text, in order.
func incidentLines(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if rule, rest, ok := strings.Cut(line, " · "); ok && strings.Contains(rule, "/") && strings.Contains(rest, " · open ") {
			obj, _, _ := strings.Cut(rest, " · open ")
			out = append(out, rule+" · "+obj)
		}
	}
	return out
}

// TestArgoCDExtensionInArgoCDsOwnUIInChromium runs the extension inside Argo CD's own web UI, v3.6.1's and
// v2.14.21's (built from the modules' sources by make tools-argocd-ui), served by the real argocd-server with the extension installed the
// documented way: the bundle unpacked from serve's /ui/extension.tar into argocd-server's /tmp/extensions/, the
// proxy extension, its backend, header secret and RBAC lines taken from manifests/components/argocd-extension. A
// PreSync hook Job of a real application keeps the hook finalizer after a successful sync (as an older release left
// it); serve diagnoses it. Users log in on Argo CD's login page; the application view's syncmedic tab, the hook
// Job's syncmedic resource tab and the status-panel item show the diagnosis (the exact rule and object, nothing
// else); bob, not in fixBy, is refused the fix (in the tab and at the API through argocd-server); alice reviews the
// plan and applies it, and the hook finalizer is gone.
func TestArgoCDExtensionInArgoCDsOwnUIInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("a real Argo CD stack and Chromium")
	}
	env := testenv.KubeWithControllers(t)
	for _, version := range []string{testenv.ArgoCDV3, testenv.ArgoCDV2} {
		t.Run("on "+version, func(t *testing.T) {
			if _, err := testenv.ArgoCDUIDir(version); err != nil {
				t.Fatalf("Argo CD's web UI is not built: %v", err)
			}
			testExtensionInArgoCDsOwnUI(t, env, version)
		})
	}
}

// testExtensionInArgoCDsOwnUI is TestArgoCDExtensionInArgoCDsOwnUIInChromium on one Argo CD version.
func testExtensionInArgoCDsOwnUI(t *testing.T, env *testenv.Env, version string) {
	token := testToken("api-token-for-the-real-argocd-ui")

	cms, _ := argoCDInstallWithExtension(t)
	// extensionConfig is the component's extension.config entries with its in-cluster Service URL pointed at base.
	extensionConfig := func(base string) map[string]string {
		out := map[string]string{}
		for k, v := range cms["argocd-cm"] {
			if strings.HasPrefix(k, "extension.config") {
				out[k] = strings.ReplaceAll(v, "http://syncmedic.syncmedic.svc.cluster.local:9292", base)
			}
		}
		return out
	}
	// serve starts after the stack (it watches it), on a port chosen then: argocd-server first gets a backend nothing
	// listens on, then the real one (it follows extension.config changes).
	settings := extensionConfig("http://127.0.0.1:1")
	require.NotEmpty(t, settings, "the component sets no extension.config")
	var policy []string
	for k, v := range cms["argocd-rbac-cm"] {
		if strings.HasPrefix(k, "policy.") && strings.HasSuffix(k, ".csv") {
			policy = append(policy, strings.Split(strings.TrimSpace(v), "\n")...)
		}
	}
	params := map[string]string{}
	for k, v := range cms["argocd-cmd-params-cm"] {
		if strings.HasPrefix(k, "server.") {
			params[k] = v
		}
	}
	require.Equal(t, map[string]string{"server.enable.proxy.extension": "true"}, params)
	extensions := t.TempDir()
	passwords := map[string]string{"alice": "alice-password-1", "bob": "bob-password-1"}
	stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version, UI: &testenv.ArgoCDUIOptions{
		Extensions: extensions,
		Settings:   settings,
		Secrets:    map[string]string{"syncmedic.proxy.authorization": "Bearer " + proxyTokenOf(token)},
		// Both users see every application and may invoke the extension; only alice is in the policy's fixBy.
		Policy:    append(policy, "g, alice, role:readonly", "g, bob, role:readonly"),
		CmdParams: params,
		Users:     passwords,
	}})
	app := testenv.ScenarioRealHookWithLeftoverFinalizer(t, stack)
	// v2.14.21 never leaves the hook finalizer, so serve looks for one only when told to (the leftover of a v2.14.3
	// before the upgrade); v3.x may leave it (auto looks there anyway).
	serve := startServe(t, "--kubeconfig", env.Kubeconfig, "--kube-checks=false", "--flux-watch=false", "--kube-events=false", "--argocd-hook-leak-check", "always",
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--api-token-file", writeFile(t, "api-token", token+"\n"), "--proxy-token-file", writeFile(t, "proxy-token", proxyTokenOf(token)),
		"--argocd-server", stack.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, "argocd-token", stack.AdminToken(t)),
		"--argocd-selector", app.Selector(), "--argocd-live-resync", "1s", "--policy-file", writeFile(t, "policy.yaml", realUIFixPolicy))
	us := &uiServe{Base: serve.Base, Token: token, Logs: serve.Logs}
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: stack.Namespace, Name: "argocd-cm"}, cm))
	for k, v := range extensionConfig(serve.Base) {
		cm.Data[k] = v
	}
	require.NoError(t, env.Client.Update(context.Background(), cm))
	us.waitIncidents(t, app.Namespace, app.Namespace+"/migrate")
	installExtensionArchive(t, serve.Base, extensions)
	require.FileExists(t, filepath.Join(extensions, "resources", ui.ExtensionFile, ui.ExtensionFile))

	base := "http://" + stack.Addr
	appURL := base + "/applications/" + stack.Namespace + "/" + app.Name
	want := string(syncmedic.RuleHookFinalizerStuck) + " · Job/" + app.Namespace + "/migrate"
	rule, ok := syncmedic.LookupRule(syncmedic.RuleHookFinalizerStuck)
	require.True(t, ok)
	hasFinalizer := func(j *batchv1.Job) bool { return j != nil && slices.Contains(j.Finalizers, testenv.HookFinalizer) }

	var last string
	bobToken := stack.Token(t, "bob")
	require.Eventually(t, func() bool {
		var code int
		code, _, last = apiIncidents(base+"/extensions/syncmedic"+ui.IncidentsPath, http.Header{
			"Cookie":                  {"argocd.token=" + bobToken},
			"Argocd-Application-Name": {stack.Namespace + ":" + app.Name}, "Argocd-Project-Name": {"default"}})
		return code == http.StatusOK
	}, time.Minute, 200*time.Millisecond, "argocd-server's proxy extension never reached serve: %s", last)

	t.Run("argocd-server serves the installed bundle in /extensions.js", func(t *testing.T) {
		code, body := get(base + "/extensions.js")
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, "resources/"+ui.ExtensionFile+"/"+ui.ExtensionFile)
		require.Contains(t, body, "registerStatusPanelExtension")
	})

	// A new browser for each view: a page's incident streams (and Argo CD's own watches) are long-lived HTTP/1.1
	// requests, and a full page load in the same browser does not free the previous page's connections at once.
	bob := func(t *testing.T) *testenv.Browser {
		b := testenv.NewBrowser(t)
		realUILogin(b, base, "bob", passwords["bob"])
		return b
	}
	t.Run("the application view's syncmedic tab shows the diagnosis, and bob is not offered the fix", func(t *testing.T) {
		b := bob(t)
		b.Open(appURL + "?view=syncmedic")
		b.WaitText(want)
		b.WaitText("Fix on demand: ")
		text := b.Text()
		require.Equal(t, []string{want}, incidentLines(text), "the exact rule and object, nothing else:\n%s", text)
		require.Contains(t, text, rule.Title)
		require.Contains(t, text, "metadata.finalizers")
		require.NotContains(t, b.Source(), "syncmedic-fix-plan", "no Fix… button for a user outside fixBy")
	})
	t.Run("the hook Job's syncmedic resource tab and the status panel show the diagnosis", func(t *testing.T) {
		b := bob(t)
		b.Open(appURL + "?view=tree&node=" + url.QueryEscape("batch/Job/"+app.Namespace+"/migrate/0") + "&tab=extension-0")
		b.WaitText(want)
		text := b.Text()
		require.Equal(t, []string{want}, incidentLines(text), "the exact rule and object, nothing else:\n%s", text)
		require.Regexp(t, `(?i)syncmedic\s+`+regexp.QuoteMeta(rule.Title)+` — \d+(s| min)`, text, "the status panel item")
	})
	t.Run("bob's fix request through argocd-server is refused and changes nothing", func(t *testing.T) {
		id := openIncidentID(t, us, app.Namespace)
		code, body := postJSON(t, base+"/extensions/syncmedic"+ui.IncidentsPath+"/"+id+"/fix", "{}", http.Header{
			"Cookie":                  {"argocd.token=" + bobToken},
			"Argocd-Application-Name": {stack.Namespace + ":" + app.Name}, "Argocd-Project-Name": {"default"}})
		require.Equal(t, http.StatusForbidden, code, body)
		require.True(t, app.WaitJob(t, "migrate", time.Second, hasFinalizer), "the refused request changed the Job")
	})

	alice := testenv.NewBrowser(t)
	realUILogin(alice, base, "alice", passwords["alice"])
	t.Run("alice reviews the plan, applies it, and the hook finalizer is gone", func(t *testing.T) {
		alice.Open(appURL + "?view=syncmedic")
		alice.WaitText(want)
		alice.WaitText(rule.Title + " — ") // the status panel item
		if *update && version == testenv.ArgoCDV3 {
			alice.Resize(1600, 1000)
			require.NoError(t, os.WriteFile(filepath.Join(screenshots, "argocd-extension.png"), alice.Screenshot(), 0o644))
		}
		alice.Click(`.syncmedic-fix-plan`)
		alice.WaitText("syncmedic will apply argocd/remove-hook-finalizer:")
		alice.WaitText("PatchResource")
		require.True(t, app.WaitJob(t, "migrate", time.Second, hasFinalizer), "the plan changed nothing")
		alice.Click(`.syncmedic-fix-confirm`)
		alice.WaitText("argocd/remove-hook-finalizer: succeeded (changed)")
		require.True(t, app.WaitJob(t, "migrate", 30*time.Second, func(j *batchv1.Job) bool { return j != nil && !hasFinalizer(j) }),
			"the hook finalizer is removed")
		require.Contains(t, serve.Logs.String(), `requestedBy="argocd user alice via argocd-extension"`)
	})
}

// openIncidentID returns the ID of the one open incident serve lists in namespace.
func openIncidentID(t *testing.T, s *uiServe, namespace string) string {
	t.Helper()
	_, _, body := apiIncidents(s.Base+ui.IncidentsPath+"?namespace="+namespace, http.Header{"Authorization": {"Bearer " + s.Token}})
	var list ui.IncidentList
	require.NoError(t, json.Unmarshal([]byte(body), &list), body)
	require.Len(t, list.Items, 1, body)
	return list.Items[0].ID
}
