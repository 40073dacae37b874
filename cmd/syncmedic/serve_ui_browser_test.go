package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// screenshots is where the browser tests write the README's screenshots under -update.
var screenshots = filepath.Join("..", "..", "docs", "screenshots")

// chromium runs Debian's headless Chromium with the flags this closed network needs and returns its stdout.
func chromium(t *testing.T, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if testing.Short() {
			t.Skip("chromium is not installed: run make tools-ui")
		}
		t.Fatalf("chromium is not installed: run make tools-ui (%v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--window-size=1200,800", "--virtual-time-budget=5000"}
	cmd := exec.CommandContext(ctx, path, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "chromium %v: %s", args, stderr.String())
	return stdout.String()
}

// dumpDOM returns the DOM of url after its scripts ran (and polled) for five seconds of virtual time.
func dumpDOM(t *testing.T, url string) string {
	t.Helper()
	return chromium(t, "--dump-dom", url)
}

// screenshot takes a PNG of url; under -update it also replaces docs/screenshots/name.
func screenshot(t *testing.T, url, name string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	chromium(t, "--hide-scrollbars", "--screenshot="+file, url)
	png, err := os.ReadFile(file)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "not a PNG")
	if *update {
		require.NoError(t, os.MkdirAll(screenshots, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(screenshots, name), png, 0o644))
	}
}

// serveAStuckHook runs serve with its incident page against a test cluster in which a hook Job is stuck on its
// finalizer (in namespace ns), and returns once serve has an incident about it.
func serveAStuckHook(t *testing.T) (env *testenv.Env, ns string, job *batchv1.Job, serve *uiServe) {
	t.Helper()
	env = testenv.Kube(t)
	ns = env.Namespace(t)
	job = testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: "migrate", App: ns + "-checkout"})
	serve = startUIServe(t, env)
	serve.waitIncidents(t, ns, ns+"/"+job.Name)
	return env, ns, job, serve
}

// TestIncidentPageInChromium loads the incident page of a running serve, fed by the test control plane, in headless
// Chromium and checks what it renders.
func TestIncidentPageInChromium(t *testing.T) {
	_, ns, job, serve := serveAStuckHook(t)
	page := serve.Base + ui.PagePath

	t.Run("with the token the page shows the incident, its evidence and its fix", func(t *testing.T) {
		dom := dumpDOM(t, page+"#token="+url.QueryEscape(serve.Token))
		for _, want := range []string{
			`class="incident firing"`,
			"Job.batch/" + ns + "/" + job.Name,
			"Argo CD app " + ns + "-checkout",
			"metadata.finalizers",
			"argocd.argoproj.io/hook-finalizer",
			">Evidence<", ">Fix<", ">Timeline<",
			"kubectl get job.batch " + job.Name + " -n " + ns,
			" shown · live · updated ",
		} {
			require.Contains(t, dom, want)
		}
		require.NotContains(t, dom, "not updated")
		require.NotContains(t, dom, serve.Token, "the token left the address bar and is not in the page")
	})
	t.Run("without a token the page asks for one and shows nothing", func(t *testing.T) {
		dom := dumpDOM(t, page)
		require.Contains(t, dom, `<form id="login">`, "the login form is not hidden")
		require.NotContains(t, dom, `class="incident`)
	})
	t.Run("a wrong token is refused and the page asks again", func(t *testing.T) {
		dom := dumpDOM(t, page+"#token=wrong")
		require.Contains(t, dom, `<form id="login">`)
		require.Contains(t, dom, "the token was refused")
		require.NotContains(t, dom, `class="incident`)
	})
	t.Run("the page is screenshotted for the README", func(t *testing.T) {
		screenshot(t, page+"#token="+url.QueryEscape(serve.Token), "incident-page.png")
	})
}

// extensionHost serves ui/extension/testdata/host.html — a stand-in for Argo CD's application view that provides
// React, ReactDOM and the documented window.extensionsAPI — with the bundle serve hands out, and forwards
// /extensions/syncmedic/ to serve the way argocd-server's proxy extension does (prefix stripped, the configured
// Authorization header set to the proxy token; the Argocd-Application-Name and Argocd-Project-Name headers come from the extension). It
// counts the live streams (?watch=true) the page opens.
func extensionHost(t *testing.T, serve *uiServe) *extHost {
	t.Helper()
	ext := filepath.Join("..", "..", "ui", "extension")
	umd := filepath.Join(ext, "node_modules", "react", "umd", "react.production.min.js")
	if _, err := os.Stat(umd); err != nil {
		if testing.Short() {
			t.Skip("ui/extension/node_modules is missing: run make tools-ui")
		}
		t.Fatalf("ui/extension/node_modules is missing: run make tools-ui (%v)", err)
	}
	target, err := url.Parse(serve.Base)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	director := proxy.Director
	proxy.Director = func(r *http.Request) {
		director(r)
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/extensions/syncmedic")
		r.Header.Del("Cookie")
		r.Header.Set("Authorization", "Bearer "+proxyTokenOf(serve.Token))
		r.Header.Set("Argocd-Username", "alice")
	}
	file := func(path, contentType string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			http.ServeFile(w, r, path)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/host.html", file(filepath.Join(ext, "testdata", "host.html"), "text/html; charset=utf-8"))
	mux.Handle("/react.js", file(umd, "text/javascript"))
	mux.Handle("/react-dom.js", file(filepath.Join(ext, "node_modules", "react-dom", "umd", "react-dom.production.min.js"), "text/javascript"))
	mux.HandleFunc("/extension-syncmedic.js", func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = ui.ExtensionBundlePath
		proxy.ServeHTTP(w, r)
	})
	host := &extHost{}
	mux.HandleFunc("/extensions/syncmedic/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			defer host.streamStarted()()
		}
		proxy.ServeHTTP(w, r)
	})
	host.Server = httptest.NewServer(mux)
	t.Cleanup(host.Close)
	return host
}

// extHost is the stand-in for argocd-server (extensionHost) and what it saw of the incident API's live streams.
type extHost struct {
	*httptest.Server
	mu                        sync.Mutex
	streams, mostAtOnce, open int
}

// streamStarted counts a live stream that starts; the function it returns counts its end.
func (h *extHost) streamStarted() func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.streams++
	h.open++
	h.mostAtOnce = max(h.mostAtOnce, h.open)
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.open--
	}
}

// streamsSeen returns how many live streams the page opened, and the most that were open at once.
func (h *extHost) streamsSeen() (streams, mostAtOnce int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.streams, h.mostAtOnce
}

// TestArgoCDExtensionInChromium loads the extension bundle served by a running serve into a host page that provides
// Argo CD's extension API, in headless Chromium, and checks the status panel, the application tab and the resource
// tab it renders for one application.
func TestArgoCDExtensionInChromium(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	checkout, billing := ns+"-checkout", ns+"-billing"
	testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: "checkout-migrate", App: checkout})
	testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: "billing-migrate", App: billing})
	serve := startUIServe(t, env)
	serve.waitIncidents(t, ns, ns+"/checkout-migrate", ns+"/billing-migrate")
	host := extensionHost(t, serve)
	page := host.URL + "/host.html?" + url.Values{"app": {checkout}, "job": {"checkout-migrate"}, "jobns": {ns}}.Encode()

	dom := dumpDOM(t, page)
	for _, tc := range []struct{ name, want string }{
		{"the bundle registers a status panel, an application tab and a resource tab", `data-registered="1,1,1"`},
		{"the application tab shows the application's incident", "Job/" + ns + "/checkout-migrate"},
		{"the tabs show the evidence", "metadata.finalizers"},
		{"the tabs show the commands of the fix", "kubectl get job.batch checkout-migrate -n " + ns},
		{"the resource tab is titled for the resource", "Resource tab: syncmedic (Job checkout-migrate)"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Contains(t, dom, tc.want) })
	}
	t.Run("the resource tab of the Application itself shows every incident of the application", func(t *testing.T) {
		_, tab, ok := strings.Cut(dom, `id="application-resource-tab"`)
		require.True(t, ok)
		tab, _, _ = strings.Cut(tab, `class="panes"`)
		require.Contains(t, tab, "Job/"+ns+"/checkout-migrate")
	})
	t.Run("the status panel names the open incident and its age", func(t *testing.T) {
		rule, ok := syncmedic.LookupRule(syncmedic.RuleStuckTerminating)
		require.True(t, ok)
		_, panel, ok := strings.Cut(dom, `class="syncmedic-status"`)
		require.True(t, ok, "no status panel entry")
		panel, _, _ = strings.Cut(panel, `class="panes"`)
		require.Regexp(t, regexp.QuoteMeta(rule.Title)+` — \d+(s| min)`, panel)
	})
	t.Run("another application's incident is not shown", func(t *testing.T) {
		require.NotContains(t, dom, "billing-migrate")
	})
	t.Run("the four components of the application share one live stream", func(t *testing.T) {
		// Status panel, application tab, resource tab and the Application's own resource tab: a stream each would
		// hold four of the six connections a browser gives argocd-server, which Argo CD's own views need.
		streams, mostAtOnce := host.streamsSeen()
		require.Equal(t, [2]int{1, 1}, [2]int{streams, mostAtOnce}, "live streams opened, most open at once")
	})
	t.Run("no call failed", func(t *testing.T) {
		require.NotContains(t, dom, "syncmedic: HTTP")
		require.NotContains(t, dom, "unavailable")
		require.NotContains(t, dom, "Loading syncmedic incidents")
	})
	// The README's screenshot of the extension is taken inside Argo CD's own UI
	// (TestArgoCDExtensionInArgoCDsOwnUIInChromium), not on this stand-in page.
}
