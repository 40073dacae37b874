package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/common"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// fixOnDemandPolicy lets the Argo CD user alice fix a held hook finalizer on demand (its group entry counts for
// nobody: the policy does not trust the groups argocd-server forwards); nobody else may, and nothing
// is done unattended.
const fixOnDemandPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: notify, threshold: 1s, fixBy: ["user:alice", "group:sre"]}
`

// fixServe is a running serve watching the in-process argocd-server, with the incident API on.
type fixServe struct {
	uiServe
}

// startFixServe runs serve on addr against argo (as its own Argo CD account "syncmedic", allowed to get and update
// applications) with the incident API on (token) and policy.
func startFixServe(t *testing.T, env *testenv.Env, argo *testenv.ArgoCDServer, policy, addr, token string) *fixServe {
	t.Helper()
	r := startServeOn(t, addr, "--kubeconfig", env.Kubeconfig,
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--api-token-file", writeFile(t, "api-token", token+"\n"), "--proxy-token-file", writeFile(t, "proxy-token", proxyTokenOf(token)),
		"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, "argocd-token", argo.Token(t, "syncmedic")),
		"--policy-file", writeFile(t, "policy.yaml", policy), "--flux-watch=false", "--kube-events=false",
		// No periodic re-read of live state during the test: an incident a fix resolved resolves because serve
		// evaluates the application again after the remedy (reevaluateAfterRemedies), not at the next resync.
		"--argocd-live-resync", "10m")
	s := &fixServe{uiServe{Base: r.Base, Token: token, Logs: r.Logs}}
	t.Cleanup(func() { require.NotContains(t, s.Logs.String(), s.Token, "serve logged the API token") })
	require.Eventually(t, func() bool { code, _ := get(s.Base + "/readyz"); return code == http.StatusOK }, 60*time.Second, 50*time.Millisecond, s.Logs.String())
	return s
}

// postJSON posts body to url with header and returns the status and the body.
func postJSON(t *testing.T, url, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

// TestAFixOnDemandThroughArgoCDsProxyExtension runs the whole "Fix" path of the Argo CD extension for real: the
// browser's request goes through argocd-server's proxy extension, which authenticates the Argo CD user and forwards
// their name; serve checks the policy's fixBy, answers the plan (dry-run), then on confirmation removes the hook
// finalizer through argocd-server's PatchResource and records who asked.
func TestAFixOnDemandThroughArgoCDsProxyExtension(t *testing.T) {
	env := testenv.Kube(t)
	checkout := "fix-checkout"

	cms, _ := argoCDInstallWithExtension(t)
	settings := map[string]string{}
	var policy []string
	for k, v := range cms["argocd-rbac-cm"] {
		if strings.HasPrefix(k, "policy.") && strings.HasSuffix(k, ".csv") {
			policy = append(policy, strings.Split(strings.TrimSpace(v), "\n")...)
		}
	}
	// argocd-server reads the extension's backend when it starts: serve's address and token are chosen first.
	addr, token := freeAddr(t), testToken("api-token-for-the-fix-test")
	for k, v := range cms["argocd-cm"] {
		if strings.HasPrefix(k, "extension.config") {
			settings[k] = strings.ReplaceAll(v, "http://syncmedic.syncmedic.svc.cluster.local:9292", "http://"+addr)
		}
	}
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"alice", "carol", "syncmedic"},
		// alice and carol are read-only users with the extensions line; only alice is in the policy's fixBy.
		// syncmedic is serve's own account: it reads applications and patches their resources.
		Policy: append(policy, "g, alice, role:readonly", "g, carol, role:readonly",
			"p, role:syncmedic, applications, get, */*, allow", "p, role:syncmedic, applications, update, */*, allow", "g, syncmedic, role:syncmedic"),
		Settings:       settings,
		ProxyExtension: true,
		Secrets:        map[string]string{"syncmedic.proxy.authorization": "Bearer " + proxyTokenOf(token)},
	})
	// hand-written state: see leakedHook. The in-process argocd-server has no application-controller: the
	// finished operation and the hook it leaked are written as leakedHook says. What this test proves is the path of a person's fix, which is all real.
	job := leakedHook(t, argo, checkout)
	ns := job.Namespace

	serve := startFixServe(t, env, argo, fixOnDemandPolicy, addr, token)
	serve.waitIncidents(t, ns, ns+"/"+job.Name)
	alice, carol := argo.Token(t, "alice"), argo.Token(t, "carol")
	viaArgoCD := func(token string) http.Header {
		return http.Header{"Argocd-Application-Name": {argo.Namespace + ":" + checkout}, "Argocd-Project-Name": {"default"},
			"Cookie": {common.AuthCookieName + "=" + token}}
	}
	base := "http://" + argo.Addr + "/extensions/syncmedic" + ui.IncidentsPath

	var inc ui.Incident
	t.Run("the incident says alice may fix it and carol may not", func(t *testing.T) {
		for _, who := range []struct {
			token   string
			allowed bool
		}{{alice, true}, {carol, false}} {
			var body string
			require.Eventually(t, func() bool {
				code, _, b := apiIncidents(base, viaArgoCD(who.token))
				body = b
				return code == http.StatusOK
			}, 30*time.Second, 100*time.Millisecond, "argocd-server forwards: %s", body)
			var list ui.IncidentList
			require.NoError(t, json.Unmarshal([]byte(body), &list))
			require.Len(t, list.Items, 1, body)
			inc = list.Items[0]
			require.NotNil(t, inc.Fix, body)
			require.Equal(t, who.allowed, inc.Fix.Allowed, body)
		}
	})
	fixURL := base + "/" + inc.ID + ui.FixSuffix

	t.Run("carol, not in fixBy, is refused by the policy and nothing changes", func(t *testing.T) {
		code, body := postJSON(t, fixURL, `{}`, viaArgoCD(carol))
		require.Equal(t, http.StatusForbidden, code, body)
		require.Contains(t, body, "argocd user carol")
		require.Contains(t, body, "not in fixBy")
	})
	t.Run("carol's browser naming her alice and group sre is still carol", func(t *testing.T) {
		// argocd-server sets Argocd-Username for a logged-in user over the browser's; a local user has no groups
		// claim, so the browser's Argocd-User-Groups passes, and serve does not count it (no trustProxyGroups).
		h := viaArgoCD(carol)
		h.Set("Argocd-Username", "alice")
		h.Set("Argocd-User-Groups", "sre")
		code, body := postJSON(t, fixURL, `{}`, h)
		require.Equal(t, http.StatusForbidden, code, body)
		require.Contains(t, body, "policy: argocd user carol via argocd-extension is not in fixBy (user:alice, group:sre)")
	})
	t.Run("the API token with Argo CD's headers is refused by serve itself", func(t *testing.T) {
		h := http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}, "Argocd-Username": {"alice"}}
		code, body := postJSON(t, serve.Base+ui.IncidentsPath+"/"+inc.ID+ui.FixSuffix, `{}`, h)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, body, "header Argocd-Username is honoured only on requests argocd-server's proxy extension sends with the proxy token")
	})
	var plan ui.Fix
	t.Run("alice gets the plan first, and it changes nothing", func(t *testing.T) {
		code, body := postJSON(t, fixURL, `{}`, viaArgoCD(alice))
		require.Equal(t, http.StatusOK, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), &plan))
		require.Equal(t, "FixPlan", plan.Kind)
		require.Equal(t, "user:alice", plan.AllowedBy)
		require.Contains(t, strings.Join(plan.Steps, "\n"), "PatchResource")
		cur := &batchv1.Job{}
		require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), cur))
		require.Contains(t, cur.Finalizers, rules.HookFinalizer, "a plan changes nothing")
	})
	// The extension follows the application's incidents as a server-sent event stream through the same proxy.
	events := followIncidents(t, base+"?watch=true&state=all", viaArgoCD(alice))
	t.Run("the live stream reaches the extension through argocd-server's proxy", func(t *testing.T) {
		list := events.next(t, func(l ui.IncidentList) bool { return len(l.Items) == 1 })
		require.Equal(t, inc.ID, list.Items[0].ID)
		require.NotEqual(t, "resolved", list.Items[0].State)
	})
	t.Run("alice confirms and the finalizer goes through argocd-server", func(t *testing.T) {
		code, body := postJSON(t, fixURL, `{"confirm": "`+plan.Confirm+`"}`, viaArgoCD(alice))
		require.Equal(t, http.StatusOK, code, body)
		var done ui.Fix
		require.NoError(t, json.Unmarshal([]byte(body), &done))
		require.Equal(t, "FixResult", done.Kind)
		require.Equal(t, "succeeded", string(done.Result), body)
		require.True(t, done.Changed, body)
		require.Eventually(t, func() bool {
			err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &batchv1.Job{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second, 50*time.Millisecond, "the held Job is gone once its finalizer is")
	})
	t.Run("the fixed incident resolves at once, and the live stream tells the extension without a poll", func(t *testing.T) {
		list := events.next(t, func(l ui.IncidentList) bool { return len(l.Items) == 1 && l.Items[0].State == "resolved" })
		require.Equal(t, inc.ID, list.Items[0].ID)
	})
	t.Run("the audit trail names alice: the log line and the incident's attempt", func(t *testing.T) {
		require.Contains(t, serve.Logs.String(), "requestedBy=\"argocd user alice via argocd-extension\"")
		_, _, body := apiIncidents(serve.Base+ui.IncidentsPath+"/"+inc.ID, http.Header{"Authorization": {"Bearer " + serve.Token}})
		require.Contains(t, body, `"requestedBy": "argocd user alice via argocd-extension"`)
	})
	t.Run("a second confirm of the same plan does not apply it again", func(t *testing.T) {
		var code int
		var body string
		assert.Eventually(t, func() bool {
			code, body = postJSON(t, fixURL, `{"confirm": "`+plan.Confirm+`"}`, viaArgoCD(alice))
			return code == http.StatusConflict || code == http.StatusTooManyRequests
		}, 30*time.Second, 200*time.Millisecond)
		require.Contains(t, []int{http.StatusConflict, http.StatusTooManyRequests}, code, body)
	})
}

// incidentStream is an open ?watch=true stream of the incident API: each event's list, as it arrives.
type incidentStream struct{ lists chan ui.IncidentList }

// followIncidents opens the stream at url with header and reads it until the test ends.
func followIncidents(t *testing.T, url string, header http.Header) *incidentStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header = header.Clone()
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	s := &incidentStream{lists: make(chan ui.IncidentList, 64)}
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var l ui.IncidentList
			if json.Unmarshal([]byte(data), &l) == nil {
				s.lists <- l
			}
		}
		close(s.lists)
	}()
	return s
}

// next returns the first list the stream sends that satisfies ok, failing after 30 seconds.
func (s *incidentStream) next(t *testing.T, ok func(ui.IncidentList) bool) ui.IncidentList {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, open := <-s.lists:
			require.True(t, open, "the stream ended")
			if ok(l) {
				return l
			}
		case <-deadline:
			t.Fatal("no such list on the stream within 30s")
		}
	}
}
