package install

import (
	"strings"
	"testing"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// readmeHelmSection is the README section whose first sh block installs the chart.
const readmeHelmSection = "### Install with Helm"

// helmWithoutArgoCDOrSlack is the Helm section's block for a cluster without Argo CD and out of Slack's reach: its
// commands (continuation lines joined) without the syncmedic-argocd-ca Secret and the argocd.* and slack.channel
// values (empty, the chart's defaults, mean no Argo CD and no Slack), after the token the serve section makes.
func helmWithoutArgoCDOrSlack(t *testing.T, block string) string {
	t.Helper()
	return "TOKEN=$(openssl rand -hex 32)   # as in \"Running syncmedic serve in the cluster\"\n" + leaveOut(t, block,
		func(code string) bool { return strings.Contains(code, "syncmedic-argocd-ca") },
		func(args []string, i int) int {
			if args[i] == "--set" && i+1 < len(args) &&
				(strings.HasPrefix(args[i+1], "argocd.") || strings.HasPrefix(args[i+1], "slack.channel=")) {
				return 2
			}
			return 0
		},
		[]string{
			"kubectl -n syncmedic create secret generic syncmedic-argocd-ca --from-file=ca.crt=argocd-ca.crt",
			"--set argocd.server=argocd-server.argocd.svc:443",
			"--set argocd.tls.mode=ca",
			"--set slack.channel='#gitops-incidents'",
		})
}

// TestHelmInstallOnTheRealNode installs syncmedic with `helm install` of the chart as the README says (bin/helm,
// the blocks read from it), beside Flux running as Pods, and checks what TestKustomizeInstallOnTheRealNode checks:
// both replicas Ready, Flux's signed events accepted through the Service, and nothing left after the README's Helm
// uninstall.
func TestHelmInstallOnTheRealNode(t *testing.T) {
	n := testenv.RealNode(t)
	importSyncmedicImage(t, n)
	n.InstallFlux(t)
	work := workDir(t)
	install := helmWithoutArgoCDOrSlack(t, readmeBlock(t, readmeHelmSection, 1)) + "\n" + readmeBlock(t, readmeFluxSection, 1)
	t.Logf("install:\n%s", runShell(t, n, work, install))
	checkInstalled(t, n, "syncmedic-helm")
	t.Logf("uninstall:\n%s", runShell(t, n, work, readmeBlock(t, readmeUninstallSection, 2)))
	checkNothingLeft(t, n)
}
