package install

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// readmeHelmSection is the README section whose first sh block installs the chart.
const readmeHelmSection = "### Install with Helm"

// helmWithoutSlack is the Helm section's block after what it takes from "Running syncmedic serve in the cluster"
// (the TOKEN and the argocd-ca.crt copy of Argo CD's certificate, the serve block's own lines), its commands
// (continuation lines joined) without the slack.channel value: Slack is out of the Pods' reach here, and the
// chart's default (empty) means no Slack.
func helmWithoutSlack(t *testing.T, block string) string {
	t.Helper()
	var fromServe []string
	for _, line := range strings.Split(readmeBlock(t, readmeServeSection, 1), "\n") {
		if strings.HasPrefix(line, "TOKEN=") || strings.Contains(line, "> argocd-ca.crt") {
			fromServe = append(fromServe, line)
		}
	}
	require.Len(t, fromServe, 2, "the serve block's TOKEN and argocd-ca.crt lines")
	return strings.Join(fromServe, "\n") + "\n" + leaveOut(t, block,
		func(string) bool { return false },
		func(args []string, i int) int {
			if args[i] == "--set" && i+1 < len(args) && strings.HasPrefix(args[i+1], "slack.channel=") {
				return 2
			}
			return 0
		},
		[]string{"--set slack.channel='#gitops-incidents'"})
}

// TestHelmInstallOnTheRealNode installs syncmedic with `helm install` of the chart as the README says (bin/helm,
// the blocks read from it), beside Argo CD and Flux running as Pods, and checks what
// TestKustomizeInstallOnTheRealNode checks: both replicas Ready, the stuck hook on the real Argo CD announced
// (argocd.tls.mode=ca against Argo CD's own certificate), Flux's signed events accepted through the Service, and
// nothing left after the README's Helm uninstall.
func TestHelmInstallOnTheRealNode(t *testing.T) {
	n := testenv.RealNode(t)
	importSyncmedicImage(t, n)
	n.InstallFlux(t)
	n.InstallArgoCD(t)
	n.ApplyArgoCD(t, filepath.Join(repoRoot(t), "manifests", "components", "argocd-account"))
	work := workDir(t)
	issueSyncmedicToken(t, n, work)
	install := helmWithoutSlack(t, readmeBlock(t, readmeHelmSection, 1)) + "\n" + readmeBlock(t, readmeFluxSection, 1)
	t.Logf("install:\n%s", runShell(t, n, work, install))
	checkInstalled(t, n, "syncmedic-helm")
	checkStuckHookAnnounced(t, n)
	t.Logf("uninstall:\n%s", runShell(t, n, work, readmeBlock(t, readmeUninstallSection, 2)))
	checkNothingLeft(t, n)
}
