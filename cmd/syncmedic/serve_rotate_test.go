package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
)

// mountedSecret is a Secret volume laid out as the kubelet's atomic writer does: each key a symlink through ..data,
// ..data a symlink to a timestamped directory, swapped by a rename when the Secret changes.
type mountedSecret struct {
	t   *testing.T
	dir string
	n   int
}

func newMountedSecret(t *testing.T, data map[string]string) *mountedSecret {
	m := &mountedSecret{t: t, dir: t.TempDir()}
	m.update(data)
	for key := range data {
		require.NoError(t, os.Symlink(filepath.Join("..data", key), filepath.Join(m.dir, key)))
	}
	return m
}

// path returns the path serve is given for key.
func (m *mountedSecret) path(key string) string { return filepath.Join(m.dir, key) }

// update writes data into a new directory and swaps ..data to it.
func (m *mountedSecret) update(data map[string]string) {
	m.n++
	ts := filepath.Join(m.dir, "..2026_11_26_14_00_00."+strconv.Itoa(m.n))
	require.NoError(m.t, os.Mkdir(ts, 0o755))
	for k, v := range data {
		require.NoError(m.t, os.WriteFile(filepath.Join(ts, k), []byte(v+"\n"), 0o644))
	}
	tmp := filepath.Join(m.dir, "..data_tmp")
	require.NoError(m.t, os.Symlink(filepath.Base(ts), tmp))
	require.NoError(m.t, os.Rename(tmp, filepath.Join(m.dir, "..data")))
}

// getWithToken GETs url with a bearer token and returns the status.
func getWithToken(t *testing.T, url, token string) int {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	return res.StatusCode
}

// TestServeReadsRotatedTokensWithoutARestart runs serve against the real argocd-server with its Argo CD and API
// tokens in a Secret volume laid out as the kubelet does, and updates the Secret in place while serve runs: the
// incident API takes the new token and refuses the old one, and the Argo CD watch, re-opened on its connection after
// a cut, calls with the new token (here an account that may not get applications, which /readyz then names).
func TestServeReadsRotatedTokensWithoutARestart(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"blind", "viewer"},
		Policy: []string{
			"p, role:viewer, applications, get, */*, allow", "g, viewer, role:viewer",
			"p, role:blind, projects, get, *, allow", "g, blind, role:blind",
		},
	})
	proxy := testenv.NewProxy(t, argo.Addr)
	viewer := argo.Token(t, "viewer")
	apiOne, apiTwo, proxyOne, proxyTwo := testToken("api-one"), testToken("api-two"), testToken("proxy-one"), testToken("proxy-two")
	secret := newMountedSecret(t, map[string]string{"argocd-token": viewer, "api-token": apiOne, "proxy-token": proxyOne})
	srv := startServe(t, "--state-file", filepath.Join(t.TempDir(), "state.json"),
		"--argocd-server", proxy.Addr(), "--argocd-plaintext", "--argocd-token-file", secret.path("argocd-token"),
		"--api-token-file", secret.path("api-token"), "--proxy-token-file", secret.path("proxy-token"))
	base, logs := srv.Base, srv.Logs
	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = get(base + "/readyz")
		return code == http.StatusOK && strings.Contains(body, "argocd: ok")
	}, 60*time.Second, 100*time.Millisecond, "last /readyz: %d %s\nlogs:\n%s", code, body, logs)
	incidents := base + "/api/v1/incidents"
	require.Equal(t, http.StatusOK, getWithToken(t, incidents, apiOne))
	require.Equal(t, http.StatusBadRequest, getWithToken(t, incidents, proxyOne), "the proxy token is taken (and needs the Argocd-* headers)")

	blind := argo.Token(t, "blind")
	secret.update(map[string]string{"argocd-token": blind, "api-token": apiTwo, "proxy-token": proxyTwo})

	t.Run("the incident API takes the new token and refuses the old one", func(t *testing.T) {
		require.Equal(t, http.StatusOK, getWithToken(t, incidents, apiTwo))
		require.Equal(t, http.StatusUnauthorized, getWithToken(t, incidents, apiOne))
	})
	t.Run("the proxy token too", func(t *testing.T) {
		require.Equal(t, http.StatusBadRequest, getWithToken(t, incidents, proxyTwo))
		require.Equal(t, http.StatusUnauthorized, getWithToken(t, incidents, proxyOne))
	})
	t.Run("the Argo CD watch re-opened after a cut calls with the new token", func(t *testing.T) {
		proxy.Cut()
		require.Eventually(t, func() bool {
			code, body = get(base + "/readyz")
			return strings.Contains(body, "applications, get, */*")
		}, 60*time.Second, 100*time.Millisecond, "last /readyz: %d %s\nlogs:\n%s", code, body, logs)
		require.Equal(t, http.StatusOK, code, "a pod that served stays ready: %s", body)
	})
	t.Run("a token that may read again makes the watch work again, still without a restart", func(t *testing.T) {
		secret.update(map[string]string{"argocd-token": argo.Token(t, "viewer"), "api-token": apiTwo, "proxy-token": proxyTwo})
		require.Eventually(t, func() bool {
			code, body = get(base + "/readyz")
			return strings.Contains(body, "argocd: ok")
		}, 90*time.Second, 100*time.Millisecond, "last /readyz: %d %s\nlogs:\n%s", code, body, logs)
		if rc, ok := srv.exited(); ok {
			t.Fatalf("serve exited with %d:\n%s", rc, logs)
		}
	})
}

// forwarder passes TCP connections to a target that the test switches; switching closes the connections open then.
type forwarder struct {
	l      net.Listener
	mu     sync.Mutex
	target string
	conns  []net.Conn
}

func newForwarder(t *testing.T, target string) *forwarder {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &forwarder{l: l, target: target}
	t.Cleanup(func() { _ = l.Close(); f.switchTo("") })
	go f.serve()
	return f
}

func (f *forwarder) serve() {
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		target := f.target
		f.conns = append(f.conns, c)
		f.mu.Unlock()
		go testenv.Pipe(c, target)
	}
}

// switchTo sends new connections to target and closes the open ones.
func (f *forwarder) switchTo(target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = target
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
}

// metricValue returns the value of the sample named exactly name on /metrics, or -1.
func metricValue(base, name string) float64 {
	_, body := get(base + "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// TestServeReadsARotatedCAFileWithoutARestart runs serve against the real argocd-server behind a TLS front with its
// own self-signed certificate, trusted through --argocd-ca-file in a Secret volume laid out as the kubelet does. Then
// argocd-server's certificate is replaced (another front) and the Secret updated in place: the watch reconnects,
// verifying the new certificate with the new CA, and sees an application created after the switch.
func TestServeReadsARotatedCAFileWithoutARestart(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"viewer"},
		Policy:   []string{"p, role:viewer, applications, get, */*, allow", "g, viewer, role:viewer"},
	})
	oldFront, oldCA := testenv.SelfSignedTLSFront(t, argo.Addr)
	newFront, newCA := testenv.SelfSignedTLSFront(t, argo.Addr)
	fwd := newForwarder(t, oldFront)
	secret := newMountedSecret(t, map[string]string{"ca.crt": string(oldCA)})
	srv := startServe(t, "--state-file", filepath.Join(t.TempDir(), "state.json"),
		"--argocd-server", fwd.l.Addr().String(), "--argocd-ca-file", secret.path("ca.crt"),
		"--argocd-token-file", writeFile(t, "token", argo.Token(t, "viewer")))
	base, logs := srv.Base, srv.Logs
	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = get(base + "/readyz")
		return code == http.StatusOK && strings.Contains(body, "argocd: ok")
	}, 60*time.Second, 100*time.Millisecond, "last /readyz: %d %s\nlogs:\n%s", code, body, logs)
	require.Equal(t, float64(0), metricValue(base, "syncmedic_argocd_applications"))

	secret.update(map[string]string{"ca.crt": string(newCA)})
	fwd.switchTo(newFront)
	argo.CreateApplication(t, argo.NewApplication("after-the-rotation", env.Namespace(t)))
	if !assert.Eventually(t, func() bool {
		return metricValue(base, "syncmedic_argocd_applications") == 1
	}, 90*time.Second, 200*time.Millisecond) {
		_, body = get(base + "/readyz")
		t.Fatalf("the watch never saw the application created after the rotation; /readyz: %s\nlogs:\n%s", body, logs)
	}
	if rc, ok := srv.exited(); ok {
		t.Fatalf("serve exited with %d:\n%s", rc, logs)
	}
}

// TestServeReadsARotatedSlackTokenWithoutARestart runs serve with its Slack bot token in a Secret volume laid out as
// the kubelet does: an incident before the Secret is updated in place is posted with the first token, one after it
// with the new token, without a restart.
func TestServeReadsARotatedSlackTokenWithoutARestart(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	rec := slackrec.New(t)
	secret := newMountedSecret(t, map[string]string{"slack-token": "xoxb-first"})
	srv := startServe(t, "--kubeconfig", env.Kubeconfig, "--state-file", filepath.Join(t.TempDir(), "state.json"),
		"--flux-watch=false", "--kube-events=false", "--kube-stuck-kinds", "jobs.batch", "--terminating-threshold", "1s",
		"--slack-token-file", secret.path("slack-token"), "--slack-channel", "#incidents", "--slack-api-url", rec.GetAPIURL())
	announced := func(job string) slackrec.Message {
		t.Helper()
		var roots []slackrec.Message
		require.Eventually(t, func() bool {
			roots = rec.Roots(ns, job)
			return len(roots) > 0
		}, 90*time.Second, 100*time.Millisecond, "no Slack announcement of %s/%s: %s\nlogs:\n%s", ns, job, rec.Summary(), srv.Logs)
		return roots[0]
	}
	testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: "before-rotation", App: ns + "-shop"})
	require.Equal(t, "xoxb-first", announced("before-rotation").Token)

	secret.update(map[string]string{"slack-token": "xoxb-second"})
	testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: "after-rotation", App: ns + "-shop"})
	require.Equal(t, "xoxb-second", announced("after-rotation").Token)
	if rc, ok := srv.exited(); ok {
		t.Fatalf("serve exited with %d:\n%s", rc, srv.Logs)
	}
}

// postFluxEvent POSTs a helm-controller event of now to serve's Flux receiver, signed sha256 with key, and returns
// the status. Each call sends another body (its message numbered), so none is a copy of an earlier one.
func postFluxEvent(t *testing.T, base, key string) int {
	t.Helper()
	body := []byte(`{"involvedObject":{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","namespace":"apps","name":"redis"},` +
		`"severity":"info","timestamp":"` + time.Now().UTC().Format(time.RFC3339) + `","message":"Helm upgrade succeeded ` +
		strconv.FormatInt(fluxEventSeq.Add(1), 10) + `","reason":"UpgradeSucceeded","reportingController":"helm-controller"}`)
	sig, err := flux.Sign(body, "sha256", []byte(key))
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+flux.EventsPath, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(flux.SignatureHeader, sig)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	return res.StatusCode
}

// fluxEventSeq numbers postFluxEvent's messages.
var fluxEventSeq atomic.Int64

// TestServeReadsARotatedFluxHMACTokenWithoutARestart runs serve's Flux receiver with the generic-hmac Provider's
// token in a Secret volume laid out as the kubelet does, and updates the Secret in place while serve runs: the
// receiver checks the next event with the new token and refuses one signed with the old.
func TestServeReadsARotatedFluxHMACTokenWithoutARestart(t *testing.T) {
	secret := newMountedSecret(t, map[string]string{"flux-hmac-token": "hmac-token-one"})
	srv := startServe(t, "--state-file", filepath.Join(t.TempDir(), "state.json"), "--kube-events=false", "--flux-watch=false",
		"--flux-hmac-token-file", secret.path("flux-hmac-token"))
	require.Equal(t, http.StatusAccepted, postFluxEvent(t, srv.Base, "hmac-token-one"), srv.Logs)
	require.Equal(t, http.StatusUnauthorized, postFluxEvent(t, srv.Base, "hmac-token-two"), "not yet the token")

	secret.update(map[string]string{"flux-hmac-token": "hmac-token-two"})
	require.Equal(t, http.StatusAccepted, postFluxEvent(t, srv.Base, "hmac-token-two"), srv.Logs)
	require.Equal(t, http.StatusUnauthorized, postFluxEvent(t, srv.Base, "hmac-token-one"), "the old token signs no more")
	if rc, ok := srv.exited(); ok {
		t.Fatalf("serve exited with %d:\n%s", rc, srv.Logs)
	}
}

// openedView waits for views.open number n (from 1) and returns it.
func openedView(t *testing.T, rec *slackrec.Server, n int, logs fmt.Stringer) slackrec.Message {
	t.Helper()
	var opened []slackrec.Message
	require.Eventually(t, func() bool {
		opened = opened[:0]
		for _, v := range rec.Views() {
			if v.Method == "views.open" {
				opened = append(opened, v)
			}
		}
		return len(opened) >= n
	}, 30*time.Second, 20*time.Millisecond, "views.open #%d never came: %s\nlogs:\n%s", n, rec.Summary(), logs)
	return opened[n-1]
}

// TestServeReadsRotatedSlackRequestURLSecretsWithoutARestart runs serve with the Slack request URL on, its bot token
// and signing secret in a Secret volume laid out as the kubelet does, and updates the Secret in place while serve
// runs: a click signed with the old secret is refused from then on, one signed with the new secret is taken, and
// the dialog it opens (views.open) carries the new bot token.
func TestServeReadsRotatedSlackRequestURLSecretsWithoutARestart(t *testing.T) {
	rec := slackrec.New(t)
	secret := newMountedSecret(t, map[string]string{"slack-token": "xoxb-first", "slack-signing-secret": "signing-one"})
	srv := startServe(t, "--state-file", filepath.Join(t.TempDir(), "state.json"), "--kube-events=false", "--flux-watch=false",
		"--slack-token-file", secret.path("slack-token"), "--slack-channel", "#incidents", "--slack-api-url", rec.GetAPIURL(),
		"--slack-signing-secret-file", secret.path("slack-signing-secret"))
	click := func(secret string) int {
		body := slackrec.FormBody(slackrec.BlockActions("U0ALICE", "alice", "T0", "C0", "1.2", slacknotify.ActionFix, "0123456789abcdef-1", "trig"))
		code, answer, err := slackrec.PostInteraction(srv.Base+slacknotify.InteractionsPath, slackrec.Sign(secret, time.Now(), body), body)
		require.NoError(t, err)
		require.Contains(t, []int{http.StatusOK, http.StatusUnauthorized}, code, answer)
		return code
	}
	require.Equal(t, http.StatusOK, click("signing-one"), srv.Logs)
	require.Equal(t, "xoxb-first", openedView(t, rec, 1, srv.Logs).Token)

	secret.update(map[string]string{"slack-token": "xoxb-second", "slack-signing-secret": "signing-two"})
	require.Equal(t, http.StatusUnauthorized, click("signing-one"), "the old signing secret verifies no more")
	require.Equal(t, http.StatusOK, click("signing-two"), srv.Logs)
	v := openedView(t, rec, 2, srv.Logs)
	require.Equal(t, "xoxb-second", v.Token, "the dialog is opened with the new bot token")
	require.Contains(t, v.View, "no incident 0123456789abcdef-1")
	require.Len(t, rec.Views(), 2, "the refused click opened nothing: %s", rec.Summary())
}

// TestServeOpensSocketModeWithARotatedAppToken runs serve with Slack's Socket Mode, its bot and app-level tokens in
// a Secret volume laid out as the kubelet does. The Secret is updated in place and the old app token revoked; when
// Slack then refreshes the connection (a disconnect message), serve opens the next one with the new app token,
// without a restart, and a click over it opens its dialog with the new bot token.
func TestServeOpensSocketModeWithARotatedAppToken(t *testing.T) {
	rec := slackrec.New(t)
	rec.SetAppTokens("xapp-first")
	secret := newMountedSecret(t, map[string]string{"slack-token": "xoxb-first", "slack-app-token": "xapp-first"})
	srv := startServe(t, "--state-file", filepath.Join(t.TempDir(), "state.json"), "--kube-events=false", "--flux-watch=false",
		"--slack-token-file", secret.path("slack-token"), "--slack-channel", "#incidents", "--slack-api-url", rec.GetAPIURL(),
		"--slack-app-token-file", secret.path("slack-app-token"))
	require.NoError(t, rec.WaitSocket(30*time.Second), srv.Logs)
	require.Equal(t, []string{"xapp-first"}, rec.OpenedWith())

	secret.update(map[string]string{"slack-token": "xoxb-second", "slack-app-token": "xapp-second"})
	rec.SetAppTokens("xapp-second") // the old app token is revoked
	require.NoError(t, rec.Disconnect())
	require.Eventually(t, func() bool { return len(rec.OpenedWith()) == 2 }, 30*time.Second, 20*time.Millisecond,
		"no second connection: %v\nlogs:\n%s", rec.OpenedWith(), srv.Logs)
	require.Equal(t, []string{"xapp-first", "xapp-second"}, rec.OpenedWith())

	payload := slackrec.BlockActions("U0ALICE", "alice", "T0", "C0", "1.2", slacknotify.ActionFix, "0123456789abcdef-1", "trig")
	n := 0
	require.Eventually(t, func() bool { // until the click goes over the new connection
		n++
		_, err := rec.Deliver(fmt.Sprintf("env-%d", n), payload, 2*time.Second)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "no click acknowledged over the new connection\nlogs:\n%s", srv.Logs)
	require.Equal(t, "xoxb-second", openedView(t, rec, 1, srv.Logs).Token, "the dialog is opened with the new bot token")
	if rc, ok := srv.exited(); ok {
		t.Fatalf("serve exited with %d:\n%s", rc, srv.Logs)
	}
}
