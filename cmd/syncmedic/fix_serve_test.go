package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// cliFixPolicy lets only the holder of the API token named "oncall" fix a held hook finalizer on demand; nothing is
// done unattended.
const cliFixPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: notify, threshold: 1s, fixBy: ["token:oncall"]}
`

// TestFixYesGoesThroughServe runs `syncmedic fix` against a running serve (watching the in-process argocd-server,
// its incident API on with the named token "oncall"): --yes without --serve-url or --offline refuses and changes
// nothing; a token not in fixBy is refused by serve's policy (exit 2); through serve the plan is printed, confirmed,
// the hook finalizer goes through argocd-server, and the attempt is on serve's incident naming the token; a second
// fix --yes is refused by serve's memory (the incident resolved): nothing applied twice.
func TestFixYesGoesThroughServe(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"syncmedic"},
		Policy:   []string{"p, role:syncmedic, applications, get, */*, allow", "p, role:syncmedic, applications, update, */*, allow", "g, syncmedic, role:syncmedic"},
	})
	// hand-written state: see leakedHook. The in-process argocd-server has no application-controller: leakedHook
	// writes the finished operation and the hook it leaked. The fix itself goes through serve and argocd-server for real.
	job := leakedHook(t, argo, "cli-checkout")
	oncall, other := testToken("oncall-token-of-the-cli-fix-test"), testToken("other-token-of-the-cli-fix-test")
	addr := freeAddr(t)
	r := startServeOn(t, addr, "--kubeconfig", env.Kubeconfig,
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--api-token-file", writeFile(t, "api-tokens", "oncall:"+oncall+"\nother:"+other+"\n"),
		"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, "argocd-token", argo.Token(t, "syncmedic")),
		"--policy-file", writeFile(t, "policy.yaml", cliFixPolicy), "--flux-watch=false", "--kube-events=false", "--argocd-live-resync", "10m")
	serve := &uiServe{Base: r.Base, Token: oncall, Logs: r.Logs}
	serve.waitIncidents(t, job.Namespace, job.Namespace+"/"+job.Name)
	var inc ui.Incident
	{
		_, _, body := apiIncidents(serve.Base+ui.IncidentsPath+"?namespace="+job.Namespace, http.Header{"Authorization": {"Bearer " + oncall}})
		var list ui.IncidentList
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		require.Len(t, list.Items, 1, body)
		inc = list.Items[0]
	}
	held := func() bool {
		cur := &batchv1.Job{}
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), cur)
		return err == nil && strings.Contains(strings.Join(cur.Finalizers, ","), rules.HookFinalizer)
	}
	t.Setenv("ARGOCD_AUTH_TOKEN", "")
	argoFlags := []string{"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, "cli-argocd-token", argo.Token(t, "syncmedic"))}

	t.Run("--yes without --serve-url or --offline refuses and changes nothing", func(t *testing.T) {
		code, out, errOut := runCLI(t, append([]string{"fix", inc.ID, "--yes"}, argoFlags...)...)
		require.Equal(t, exitUsage, code, out+errOut)
		require.Contains(t, errOut, "nothing applied: fix --yes applies through serve, so that its kill switch, rate limit, never-repeat memory, per-application claim and incident record apply: give --serve-url and --serve-token-file")
		require.Contains(t, errOut, "--offline")
		require.True(t, held(), "nothing changed")
	})
	t.Run("a token outside fixBy is refused by serve's policy", func(t *testing.T) {
		code, out, errOut := runCLI(t, "fix", inc.ID, "--yes", "--serve-url", serve.Base, "--serve-token-file", writeFile(t, "other", other+"\n"))
		require.Equal(t, exitUsage, code, out+errOut)
		require.Contains(t, errOut, "serve refused the fix (403 Forbidden): policy: token:other via api-token is not in fixBy (token:oncall) for argocd/hook-finalizer-stuck")
		require.True(t, held(), "nothing changed")
	})
	tokenFile := writeFile(t, "oncall", oncall+"\n")
	t.Run("without --yes serve's plan is printed and nothing changes", func(t *testing.T) {
		code, out, errOut := runCLI(t, "fix", inc.ID, "--serve-url", serve.Base, "--serve-token-file", tokenFile)
		require.Equal(t, exitOK, code, out+errOut)
		require.Contains(t, out, "Incident "+inc.ID+" (firing) argocd/hook-finalizer-stuck: ")
		require.Contains(t, out, `serve's plan, for token:oncall via api-token (allowed by fixBy "token:oncall"):`)
		require.Contains(t, out, "  1. ")
		require.Contains(t, out, "Dry run: nothing was changed. Re-run with --yes to apply this plan through serve.")
		require.True(t, held(), "a plan changes nothing")
	})
	t.Run("--yes through serve applies the plan, recorded on serve's incident", func(t *testing.T) {
		code, out, errOut := runCLI(t, "fix", inc.ID, "--yes", "--serve-url", serve.Base, "--serve-token-file", tokenFile)
		require.Equal(t, exitOK, code, out+errOut)
		require.Contains(t, out, "Applied argocd/remove-hook-finalizer through serve (recorded on incident "+inc.ID+", requested by token:oncall via api-token)")
		require.Contains(t, out, "PatchResource")
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &batchv1.Job{}))
		}, 30*time.Second, 50*time.Millisecond, "the held Job is gone once its finalizer is")
		_, _, body := apiIncidents(serve.Base+ui.IncidentsPath+"?state=all&namespace="+job.Namespace, http.Header{"Authorization": {"Bearer " + oncall}})
		var list ui.IncidentList
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		require.Len(t, list.Items, 1, body)
		var applied []ui.Attempt
		for _, a := range list.Items[0].Attempts {
			if a.Result != "dry-run" {
				applied = append(applied, a)
			}
		}
		require.Len(t, applied, 1, body)
		require.Equal(t, "succeeded", applied[0].Result)
		require.Equal(t, "token:oncall via api-token", applied[0].RequestedBy)
		require.Contains(t, serve.Logs.String(), `requestedBy="token:oncall via api-token"`)
	})
	t.Run("a second --yes is refused by serve: nothing is applied twice", func(t *testing.T) {
		require.Eventually(t, func() bool {
			_, _, body := apiIncidents(serve.Base+ui.IncidentsPath+"?state=resolved&namespace="+job.Namespace, http.Header{"Authorization": {"Bearer " + oncall}})
			return strings.Contains(body, inc.ID)
		}, 30*time.Second, 100*time.Millisecond, "the fixed incident resolves")
		code, out, errOut := runCLI(t, "fix", inc.ID, "--yes", "--serve-url", serve.Base, "--serve-token-file", tokenFile)
		require.Equal(t, exitUsage, code, out+errOut)
		require.Contains(t, errOut, "serve refused the fix (409 Conflict): incident "+inc.ID+" is resolved: there is nothing to fix")
		require.Equal(t, 1, strings.Count(serve.Logs.String(), `msg=remediation `), "one remedy in serve's audit log")
	})
	t.Run("serve not reachable is a connection failure", func(t *testing.T) {
		code, out, errOut := runCLI(t, "fix", inc.ID, "--yes", "--serve-url", "http://"+freeAddr(t), "--serve-token-file", tokenFile)
		require.Equal(t, exitFailed, code, out+errOut)
		require.Contains(t, errOut, "is not reachable")
		require.NotContains(t, out+errOut, oncall, "the token is never printed")
	})
}
