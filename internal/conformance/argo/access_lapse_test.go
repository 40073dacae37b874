package argo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient"
	applicationpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// lapsePolicy announces a sync running for 10 s (the hook here runs until the test releases it) and resolves an
// incident at the first evaluation without its finding: the harshest setting for an incident nothing could read.
const lapsePolicy = `resolveAfter: 1
rules:
  argocd/operation-stuck: {mode: notify, threshold: 10s}
` + routes

// argocd-server leaves the applications an account may not get out of List, silently (server/application List
// filters by RBAC, v2.14.21 to v3.6.1). An open incident must not be taken for fixed because Argo CD's RBAC hid its
// application for a while: syncmedic's account loses `applications, get` in argocd-rbac-cm (a person editing
// Argo CD's RBAC), argocd-server restarts (syncmedic reconnects and lists again, now without the application), and
// the incident stays open — unresolved, unannounced again — while serve says the account may not see the
// applications; once the line is back, the same incident goes on (still one thread), and it resolves when the
// sync really ends. Before the fix, the list without the application reported it deleted and resolved the
// incident, which would have opened again, in a new thread, once Argo CD showed the application again.
func TestAnIncidentStaysOpenWhileArgoCDRBACHidesItsApplication(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version, func(t *testing.T) {
			t.Parallel()
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			// The test's own argocd-server, restarted below without disturbing the other tests sharing the stack.
			server := stack.StartServerReplica(t)
			account, grant, token := grantedAccount(t, stack, "lapse", "applications")
			app := testenv.ScenarioRealRunningHook(t, stack)
			d := startServeDaemonAt(t, app, newFakeSlack(t), server.Addr, token, lapsePolicy)
			stuck := incident{rule: syncmedic.RuleOperationStuck, object: appObject(app)}
			root := announcedAbout(t, d.slack, stuck.rule, stuck.object, announceWithin)
			resolved := func() bool { return strings.Contains(thread(d.slack, root), "Resolved") }
			require.False(t, resolved(), "open: %s", d.slack.summary())

			stack.SetAccountPolicy(t, account) // the account's lines removed from argocd-rbac-cm
			visible := func() bool { return listed(t, server.Addr, token, app.Name) }
			require.True(t, waitFor(30*time.Second, func() bool { return !visible() }), "argocd-server hides the application from the account")
			from := d.logLen()
			server.Restart(t)
			require.True(t, waitFor(announceWithin, func() bool {
				return strings.Contains(readyz(t, d), "applications, get")
			}), "serve reconnected and says the account may not get the applications: %s", readyz(t, d))
			require.False(t, waitFor(15*time.Second, resolved), "the incident stays open while Argo CD hides the application: %s", d.slack.summary())
			require.Contains(t, d.logs.String()[from:], "argocd list leaves out applications watched before",
				"serve did list the applications again, without this one")

			stack.SetAccountPolicy(t, account, grant...)
			require.True(t, waitFor(30*time.Second, visible), "argocd-server shows the application again")
			// serve asks CanI again every 30 s while refused, then lists again.
			require.True(t, waitFor(announceWithin+30*time.Second, func() bool {
				return strings.Contains(readyz(t, d), "argocd: ok")
			}), "serve may see the applications again: %s", readyz(t, d))
			after := d.logLen()
			require.True(t, waitFor(30*time.Second, func() bool {
				return len(d.evaluations(app, after)) > 0
			}), "serve evaluated the application again")
			require.False(t, resolved(), "still open: %s", d.slack.summary())
			require.Len(t, d.slack.roots(), 1, "the same incident, not a new one in a new thread: %s", d.slack.summary())
			onlyAnnounced(t, d.slack, stuck)

			app.Release(t, "migrate")
			done, ok := app.WaitApp(t, remedyWithin, testenv.OperationCompleted)
			require.True(t, ok, "the sync ends once its hook exits: %s", testenv.DescribeOperation(done))
			require.True(t, waitFor(announceWithin, resolved), "the incident resolves when the sync really ends: %s", d.slack.summary())
			require.Len(t, d.slack.roots(), 1, d.slack.summary())
		})
	}
}

// listed reports whether argocd-server at addr lists application name to the account of token.
func listed(t *testing.T, addr, token, name string) bool {
	t.Helper()
	c, err := apiclient.NewClient(&apiclient.ClientOptions{ServerAddr: addr, PlainText: true, AuthToken: token})
	require.NoError(t, err)
	closer, apps, err := c.NewApplicationClient()
	require.NoError(t, err)
	defer closer.Close()
	list, err := apps.List(context.Background(), &applicationpkg.ApplicationQuery{Name: &name})
	if err != nil {
		return false
	}
	return len(list.Items) == 1
}

// readyz is serve's /readyz?verbose.
func readyz(t *testing.T, d *serveDaemon) string {
	t.Helper()
	res, err := http.Get("http://" + d.addr + "/readyz?verbose")
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// grantedAccount adds a local account named prefix and a number, whose role may get every object of resource
// (applications, applicationsets), and returns it, its policy lines (for SetAccountPolicy) and a token.
func grantedAccount(t *testing.T, stack *testenv.RealArgoCD, prefix, resource string) (account string, grant []string, token string) {
	t.Helper()
	account = strings.ToLower(fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1_000_000_000))
	grant = []string{"p, role:" + account + ", " + resource + ", get, */*, allow", "g, " + account + ", role:" + account}
	return account, grant, stack.AddAccount(t, account, grant...)
}
