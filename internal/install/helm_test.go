package install

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// readmeHelmSection is the README section whose first sh block installs the chart.
const readmeHelmSection = "### Install with Helm"

// helmWithoutArgoCDOrSlack is the Helm section's block for a cluster without Argo CD and out of Slack's reach: its
// commands (continuation lines joined) without the syncmedic-argocd-ca Secret and the argocd.* and slack.channel
// values (empty, the chart's defaults, mean no Argo CD and no Slack), after the token the serve section makes.
func helmWithoutArgoCDOrSlack(t *testing.T, block string) string {
	t.Helper()
	out := []string{"TOKEN=$(openssl rand -hex 32)   # as in \"Running syncmedic serve in the cluster\""}
	var dropped []string
	for _, cmd := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		code, _, _ := strings.Cut(cmd, "  #")
		if strings.Contains(code, "syncmedic-argocd-ca") {
			dropped = append(dropped, strings.TrimSpace(code))
			continue
		}
		fields := strings.Fields(code)
		kept := fields[:0]
		for i := 0; i < len(fields); i++ {
			if fields[i] == "--set" && i+1 < len(fields) &&
				(strings.HasPrefix(fields[i+1], "argocd.") || strings.HasPrefix(fields[i+1], "slack.channel=")) {
				dropped = append(dropped, fields[i+1])
				i++
				continue
			}
			kept = append(kept, fields[i])
		}
		out = append(out, strings.Join(kept, " "))
	}
	require.Equal(t, []string{
		"kubectl -n syncmedic create secret generic syncmedic-argocd-ca --from-file=ca.crt=argocd-ca.crt",
		"argocd.server=argocd-server.argocd.svc:443",
		"argocd.tls.mode=ca",
		"slack.channel='#gitops-incidents'",
	}, dropped, "the Argo CD and Slack parts of the README's block")
	return strings.Join(out, "\n")
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
