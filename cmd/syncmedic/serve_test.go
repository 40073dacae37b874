package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// freeAddr returns a loopback address with a free port, for serve's --listen.
//
// The port is free when chosen, and taken only when serve listens, often seconds later (a test that must name
// serve's address to argocd-server starts argocd-server in between). It is picked at random below Linux's ephemeral
// range (32768 and up: net.ipv4.ip_local_port_range), where no other process's listen on port 0 or outgoing
// connection can take it meanwhile (a server of a parallel test binary that took it would answer serve's /healthz:
// startServeOn also checks serve's own metric).
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12768)))
		if err != nil {
			continue // in use: another one
		}
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		return addr
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// fluxTokenArgs is --flux-hmac-token-file with a token of the test's: serve refuses to run its Flux receiver
// without one.
func fluxTokenArgs(t *testing.T) []string {
	t.Helper()
	return []string{"--flux-hmac-token-file", writeFile(t, "flux-hmac-token", "flux-hmac-token-of-"+t.Name())}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestServeWithoutAClusterRunsOnlyTheReceiver(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	addr := freeAddr(t)
	t.Setenv("SYNCMEDIC_LISTEN", addr)
	const token = "xoxb-999-888-neverprintme"
	tokenFile := writeFile(t, "token", token+"\n")
	stateFile := filepath.Join(t.TempDir(), "state.json")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testenv.LockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--log-format", "text", "--state-file", stateFile,
			"--slack-token-file", tokenFile, "--slack-channel", "#incidents"}, fluxTokenArgs(t)...), &out, &errb)
	}()
	base := "http://" + addr
	require.Eventually(t, func() bool { code, _ := get(base + "/healthz"); return code == http.StatusOK }, 10*time.Second, 20*time.Millisecond, errb.String())

	code, _ := get(base + "/readyz")
	require.Equal(t, http.StatusOK, code)
	code, metrics := get(base + "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, metrics, "syncmedic_incidents_open 0")
	require.Contains(t, metrics, `syncmedic_findings{rule="argocd/hook-finalizer-stuck"} 0`)
	require.Contains(t, errb.String(), "no cluster: neither --kubeconfig nor an in-cluster service account")
	require.Contains(t, errb.String(), "destinations=[slack]")
	require.Contains(t, errb.String(), "app=syncmedic")

	cancel()
	select {
	case c := <-done:
		require.Equal(t, exitOK, c, errb.String())
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after its context was cancelled")
	}
	require.NotContains(t, errb.String(), token)
	require.NotContains(t, out.String(), token)
}

func TestServeRejectsBadConfiguration(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	badPolicy := writeFile(t, "policy.yaml", "rules:\n  argocd/operation-stuck:\n    mode: always\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an unknown log format", []string{"--log-format", "xml"}, "--log-format \"xml\": want json or text"},
		{"an invalid policy names the field", []string{"--policy-file", badPolicy}, "rules.argocd/operation-stuck.mode"},
		{"a ConfigMap state needs a cluster", []string{"--state-configmap", "syncmedic/state"}, "--state-configmap needs a cluster"},
		{"leader election needs a cluster", []string{"--leader-elect"}, "--leader-elect needs a cluster"},
		{"a bot token needs a channel", []string{"--slack-token-file", writeFile(t, "t", "xoxb-1")}, "--slack-token-file needs --slack-channel"},
		{"a malformed ConfigMap reference", []string{"--policy-configmap", "just-a-name"}, "want namespace/name"},
		{"a short API token", []string{"--api-token-file", writeFile(t, "api", "s3cret\n")},
			"ui: API token file: the token is 6 characters, want at least 32: write a random one with openssl rand -hex 32"},
		{"a short proxy token", []string{"--api-token-file", writeFile(t, "api", testToken("api")), "--proxy-token-file", writeFile(t, "proxy", "s3cret")},
			"ui: proxy token file: the proxy token is 6 characters, want at least 32"},
		{"a silence maximum that is not a duration", []string{"--silence-max-duration", "a week"}, `invalid argument "a week" for "--silence-max-duration" flag: "a week" is not a duration`},
		{"a Slack silence longer than the default maximum", []string{"--slack-silence-durations", "1h,336h"},
			"--slack-silence-durations: 14d is longer than --silence-max-duration 7d: offer shorter choices or raise the maximum"},
		{"a Slack silence longer than the maximum", []string{"--silence-max-duration", "1d", "--slack-silence-durations", "1h,36h"},
			"--slack-silence-durations: 1d12h0m0s is longer than --silence-max-duration 1d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append(append([]string{"serve", "--listen", freeAddr(t)}, fluxTokenArgs(t)...), tc.args...)
			code := run(context.Background(), args, &out, &errb)
			require.Equal(t, exitUsage, code)
			require.Contains(t, errb.String(), tc.want)
		})
	}
	t.Run("the silence maximum from its environment variable", func(t *testing.T) {
		t.Setenv("SYNCMEDIC_SILENCE_MAX_DURATION", "12h")
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"serve", "--listen", freeAddr(t), "--slack-silence-durations", "1h,24h"}, &out, &errb)
		require.Equal(t, exitUsage, code)
		require.Contains(t, errb.String(), "--slack-silence-durations: 1d is longer than --silence-max-duration 12h0m0s")
	})
}

// TestServeRefusesAFluxReceiverWithoutAnHMACToken: without --flux-hmac-token-file serve exits 2 naming the flag, the
// Secret and the Provider, and starts with the test-only opt-out.
func TestServeRefusesAFluxReceiverWithoutAnHMACToken(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var out, errb testenv.LockedBuffer
	code := run(context.Background(), []string{"serve", "--listen", freeAddr(t), "--state-file", filepath.Join(t.TempDir(), "state.json")}, &out, &errb)
	require.Equal(t, exitUsage, code, errb.String())
	require.Contains(t, errb.String(), "flux: --flux-hmac-token-file is required: the Flux receiver (POST /flux/events) accepts only events signed by a generic-hmac Provider.")
	require.Contains(t, errb.String(), "the Secret syncmedic-flux-hmac (key token) in flux-system, apply manifests/flux (a generic-hmac Provider with secretRef syncmedic-flux-hmac")
	require.Contains(t, errb.String(), "--flux-receiver-insecure-no-signature runs without it, for tests only")

	srv := startServe(t, "--flux-receiver-insecure-no-signature", "--state-file", filepath.Join(t.TempDir(), "state.json"))
	require.Contains(t, srv.Logs.String(), "--flux-receiver-insecure-no-signature: Flux events are accepted without a signature")
	req, err := http.NewRequest(http.MethodPost, srv.Base+"/flux/events", strings.NewReader(
		`{"involvedObject":{"kind":"HelmRelease","namespace":"apps","name":"redis"},"severity":"info"}`))
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusAccepted, res.StatusCode, "the opt-out accepts an unsigned event")

	off := startServe(t, "--flux=false", "--state-file", filepath.Join(t.TempDir(), "state.json"))
	require.Contains(t, off.Logs.String(), "flux: off (--flux=false): no event receiver, no HelmRelease or Kustomization watch")
	code, body := get(off.Metrics + "/readyz?verbose")
	require.Equal(t, http.StatusOK, code, body)
	require.NotContains(t, body, "flux")
	res, err = http.Post(off.Base+"/flux/events", "application/json", strings.NewReader(`{"involvedObject":{"kind":"HelmRelease"}}`))
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode, "no receiver without Flux")
}

// TestServeServesMetricsAndHealthOnlyOnTheMetricsAddr: with --metrics-addr, /metrics, /healthz and /readyz are
// served there and nowhere else, and the receivers and the incident API only on --listen, so a NetworkPolicy can
// admit Prometheus to the one and not the other.
func TestServeServesMetricsAndHealthOnlyOnTheMetricsAddr(t *testing.T) {
	const hmacToken = "metrics-addr-hmac-token"
	metricsAddr := freeAddr(t)
	srv := startServe(t, "--metrics-addr", metricsAddr, "--state-file", filepath.Join(t.TempDir(), "state.json"),
		"--flux-hmac-token-file", writeFile(t, "flux-hmac-token", hmacToken), "--api-token-file", writeFile(t, "api-token", "api-token-of-the-metrics-test-0123456789"))
	require.Equal(t, "http://"+metricsAddr, srv.Metrics)
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		code, body := get(srv.Metrics + path)
		require.Equal(t, http.StatusOK, code, "%s on --metrics-addr: %s", path, body)
		code, body = get(srv.Base + path)
		require.Equal(t, http.StatusNotFound, code, "%s on --listen: %s", path, body)
	}
	_, metrics := get(srv.Metrics + "/metrics")
	require.Contains(t, metrics, "syncmedic_build_info")

	require.Equal(t, http.StatusAccepted, postFluxEvent(t, srv.Base, hmacToken), "the receiver is on --listen")
	code, _ := get(srv.Base + "/api/v1/incidents")
	require.Equal(t, http.StatusUnauthorized, code, "the incident API is on --listen")
	for _, path := range []string{"/flux/events", "/api/v1/incidents", "/ui/"} {
		code, body := get(srv.Metrics + path)
		require.Equal(t, http.StatusNotFound, code, "%s on --metrics-addr: %s", path, body)
	}

	var out, errb testenv.LockedBuffer
	addr := freeAddr(t)
	code = run(context.Background(), append([]string{"serve", "--listen", addr, "--metrics-addr", addr}, fluxTokenArgs(t)...), &out, &errb)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errb.String(), "--metrics-addr "+addr+" is --listen's address: give another port, or leave --metrics-addr empty")
}

func TestPolicyFileReloadsAndKeepsTheLastGoodPolicy(t *testing.T) {
	file := writeFile(t, "policy.yaml", "rules:\n  argocd/hook-finalizer-stuck:\n    mode: auto\n")
	var logs testenv.LockedBuffer
	log, err := newLogger("json", "info", &logs)
	require.NoError(t, err)
	h, err := newPolicyHolder(context.Background(), &serveOptions{policyFile: file, policyReload: 10 * time.Millisecond}, nil, log)
	require.NoError(t, err)
	require.False(t, h.Get().KillSwitch)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.reload(ctx) }()
	defer func() { cancel(); <-done }()

	replaceFile(t, file, "killSwitch: true\n")
	require.Eventually(t, func() bool { return h.Get().KillSwitch }, 5*time.Second, 10*time.Millisecond, "the kill switch takes effect without a restart")

	replaceFile(t, file, "killSwitch: maybe\n")
	require.Eventually(t, func() bool {
		return bytes.Contains([]byte(logs.String()), []byte("the previous policy stays in force"))
	}, 5*time.Second, 10*time.Millisecond)
	require.True(t, h.Get().KillSwitch)
}

func TestPolicyWarningsAreLoggedAtLoadAndWhenTheyChange(t *testing.T) {
	file := writeFile(t, "policy.yaml", "trustProxyGroups: true\nsilenceBy: [\"group:sre\"]\n")
	var logs testenv.LockedBuffer
	log, err := newLogger("json", "info", &logs)
	require.NoError(t, err)
	h, err := newPolicyHolder(context.Background(), &serveOptions{policyFile: file, policyReload: 10 * time.Millisecond}, nil, log)
	require.NoError(t, err)
	require.Contains(t, logs.String(), `"level":"WARN","msg":"policy: trustProxyGroups is on: group: entries match the Argocd-User-Groups header`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.reload(ctx) }()
	defer func() { cancel(); <-done }()

	replaceFile(t, file, "silenceBy: [\"group:sre\"]\n")
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), `policy: silenceBy entry \"group:sre\" matches nobody`)
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 2, strings.Count(logs.String(), `"level":"WARN"`), "a reload with the same warnings logs none")
}

// replaceFile swaps path's content atomically, as the kubelet updates a mounted ConfigMap: a reader never sees a
// half-written (or truncated, empty) file.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// runningServe is `syncmedic serve` run in-process by a test until the test ends.
type runningServe struct {
	Base    string // http://127.0.0.1:port
	Metrics string // where /metrics, /healthz and /readyz are: --metrics-addr's, else Base
	Logs    *testenv.LockedBuffer
	done    chan int
}

// startServeOn runs `serve --listen addr --log-format text args...` without in-cluster settings or
// ARGOCD_AUTH_TOKEN from the environment, until the test ends (when it must stop within 15 s), and returns once
// /healthz answers. Unless args name --flux-hmac-token-file or its opt-out, the Flux receiver gets fluxTokenArgs.
func startServeOn(t *testing.T, addr string, args ...string) *runningServe {
	t.Helper()
	if !slices.Contains(args, "--flux-hmac-token-file") && !slices.Contains(args, "--flux-receiver-insecure-no-signature") && !slices.Contains(args, "--flux=false") {
		args = append(fluxTokenArgs(t), args...)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("ARGOCD_AUTH_TOKEN", "")
	s := &runningServe{Base: "http://" + addr, Metrics: "http://" + addr, Logs: &testenv.LockedBuffer{}, done: make(chan int, 1)}
	if i := slices.Index(args, "--metrics-addr"); i >= 0 && i+1 < len(args) {
		s.Metrics = "http://" + args[i+1]
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		s.done <- run(ctx, append([]string{"serve", "--listen", addr, "--log-format", "text"}, args...), &testenv.LockedBuffer{}, s.Logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop after its context was cancelled")
		}
	})
	require.Eventually(t, func() bool {
		if code, ok := s.exited(); ok {
			t.Fatalf("serve exited with %d:\n%s", code, s.Logs)
		}
		if code, _ := get(s.Metrics + "/healthz"); code != http.StatusOK {
			return false
		}
		// This serve, not another server that took the address: serve's own metric.
		_, metrics := get(s.Metrics + "/metrics")
		return strings.Contains(metrics, "syncmedic_build_info")
	}, 60*time.Second, 20*time.Millisecond, "serve never answered /healthz and /metrics on %s:\n%s", addr, s.Logs)
	return s
}

// startServe is startServeOn a free loopback port.
func startServe(t *testing.T, args ...string) *runningServe {
	t.Helper()
	return startServeOn(t, freeAddr(t), args...)
}

// exited returns serve's exit code once it has stopped.
func (s *runningServe) exited() (int, bool) {
	select {
	case code := <-s.done:
		s.done <- code
		return code, true
	default:
		return 0, false
	}
}
