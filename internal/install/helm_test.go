package install

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
)

// readmeHelmSection is the README section whose first sh block installs the chart.
const readmeHelmSection = "### Install with Helm"

// checkSlackThread waits until the stuck hook's incident on app has its thread on the Slack test server: one root
// message, in the README's channel, posted with the Secret's slack-token, naming the rule and the application.
func checkSlackThread(t *testing.T, slack *slackrec.Server, app string) {
	t.Helper()
	var posted []slackrec.Message
	poll(t, "the incident's thread on Slack", func() (bool, error) {
		posted = slack.Roots()
		return len(posted) > 0, fmt.Errorf("nothing posted")
	})
	require.Len(t, posted, 1, "one thread, the one incident's: %s", slack.Summary())
	require.Equal(t, "#gitops-incidents", posted[0].Channel)
	require.Equal(t, "unused here", posted[0].Token, "the bot token of the Secret's slack-token")
	require.Contains(t, posted[0].Text+posted[0].Blocks, "argocd/operation-stuck")
	require.Contains(t, posted[0].Text+posted[0].Blocks, app)
}

// helmWithSlackTestServer is the Helm section's block after what it takes from "Running syncmedic serve in the
// cluster" (the TOKEN and the argocd-ca.crt copy of Argo CD's certificate, the serve block's own lines), its
// commands (continuation lines joined) as written, with one value added to `helm install`: extraArgs
// --slack-api-url=slackURL, the Slack test server as the node's Pods reach it (Slack itself is out of reach here).
func helmWithSlackTestServer(t *testing.T, block, slackURL string) string {
	t.Helper()
	var fromServe []string
	for _, line := range strings.Split(readmeBlock(t, readmeServeSection, 1), "\n") {
		if strings.HasPrefix(line, "TOKEN=") || strings.Contains(line, "> argocd-ca.crt") {
			fromServe = append(fromServe, line)
		}
	}
	require.Len(t, fromServe, 2, "the serve block's TOKEN and argocd-ca.crt lines")
	lines := strings.Split(leaveOut(t, block, func(string) bool { return false }, func([]string, int) int { return 0 }, nil), "\n")
	installs := 0
	for i, line := range lines {
		if strings.HasPrefix(line, "helm install ") {
			require.Contains(t, line, "--set slack.channel='#gitops-incidents'")
			lines[i] += ` --set-json 'extraArgs=["--slack-api-url=` + slackURL + `"]'`
			installs++
		}
	}
	require.Equal(t, 1, installs, "one helm install in the README's block")
	return strings.Join(fromServe, "\n") + "\n" + strings.Join(lines, "\n")
}

// TestHelmInstallOnTheRealNode installs syncmedic with `helm install` of the chart as the README says (bin/helm,
// the blocks read from it), beside Argo CD and Flux running as Pods, and checks what
// TestKustomizeInstallOnTheRealNode checks: the CMP sidecar rendering inside the repo-server Pod, both replicas
// Ready, the stuck hook on the real Argo CD announced
// (argocd.tls.mode=ca against Argo CD's own certificate) — here also on Slack, in the README's channel, through the
// Slack test server —, Flux's signed events accepted through the Service, the extension and the incident page
// served through argocd-server with the chart's incidentAPI.enabled (the README's Helm line of "Seeing incidents"),
// the incident still the one open and its thread the only one, and nothing left after the README's Helm uninstall;
// then the installs for one tool (checkOneToolInstallsWithHelm).
func TestHelmInstallOnTheRealNode(t *testing.T) {
	n := testenv.RealNode(t)
	importSyncmedicImage(t, n)
	n.InstallFlux(t)
	n.InstallArgoCD(t)
	// Argo CD's kustomization as the README gives it: install.yaml with manifests/argocd-cmp (the sidecar) and
	// manifests/components/argocd-account (serve's account); the chart installs syncmedic's side only.
	n.ApplyArgoCD(t, filepath.Join(repoRoot(t), "manifests", "argocd-cmp"), filepath.Join(repoRoot(t), "manifests", "components", "argocd-account"))
	checkCMPRenders(t, n)
	slack := slackrec.New(t)
	u, err := url.Parse(slack.GetAPIURL())
	require.NoError(t, err)
	u.Host = n.ExposeToPods(t, u.Host)
	work := workDir(t)
	issueSyncmedicToken(t, n, work)
	install := helmWithSlackTestServer(t, readmeBlock(t, readmeHelmSection, 1), u.String()) + "\n" + readmeBlock(t, readmeFluxSection, 1)
	audit := n.AuditOffset(t)
	t.Logf("install:\n%s", runShell(t, n, work, install))
	checkInstalled(t, n, "syncmedic-helm")
	app := checkStuckHookAnnounced(t, n, helmThreshold(t, n, work))
	checkSlackThread(t, slack, app)
	ops := recordOperation(n, app)
	checkExtension(t, n, work, app, func() string { return readmeBlock(t, readmeIncidentsSection, 2) })
	checkIncidentStillOpen(t, n, app, ops())
	require.Len(t, slack.Roots(), 1, "still one thread: %s", slack.Summary())
	rbac, auditEnd := helmRBAC(t, n, work), n.AuditOffset(t)
	t.Logf("uninstall:\n%s", runShell(t, n, work, readmeBlock(t, readmeUninstallSection, 2)))
	checkNothingLeft(t, n)
	grantsUsed(t, n, audit, auditEnd, rbac, true)
	checkOneToolInstallsWithHelm(t, n, work)
}
