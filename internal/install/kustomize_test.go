package install

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
)

// The README sections whose sh blocks TestKustomizeInstallOnTheRealNode runs, in order.
const (
	readmeServeSection     = "### Running `syncmedic serve` in the cluster"
	readmeFluxSection      = "### Sending Flux events to syncmedic"
	readmeUninstallSection = "### Uninstall"
	readmeAccountSection   = "### The syncmedic Argo CD account"
)

// leaveOut returns block's commands (continuation lines joined, comments cut) without the commands dropCommand
// picks and the arguments dropArg picks (it returns how many arguments from args[i] on to leave out, 0 to keep
// args[i]), and requires that exactly want was left out, in order: if the README's block changes, the test must be
// looked at again.
func leaveOut(t *testing.T, block string, dropCommand func(code string) bool, dropArg func(args []string, i int) int, want []string) string {
	t.Helper()
	var out, dropped []string
	for _, cmd := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		code, _, _ := strings.Cut(cmd, "  #")
		if dropCommand(code) {
			dropped = append(dropped, strings.TrimSpace(code))
			continue
		}
		args := strings.Fields(code)
		var kept []string
		for i := 0; i < len(args); i++ {
			if k := dropArg(args, i); k > 0 {
				dropped = append(dropped, strings.Join(args[i:min(i+k, len(args))], " "))
				i += k - 1
				continue
			}
			kept = append(kept, args[i])
		}
		out = append(out, strings.Join(kept, " "))
	}
	require.Equal(t, want, dropped, "the parts of the README's block left out")
	return strings.Join(out, "\n")
}

// TestKustomizeInstallOnTheRealNode installs syncmedic with kustomize exactly as the README says (its sh blocks,
// read from it, run with kubectl against the real node), beside Argo CD v3.6.1 and Flux running as Pods from their
// upstream manifests: Argo CD's kustomization gets the README's manifests/argocd-cmp component, whose sidecar
// renders applications inside the real repo-server Pod (checkCMPRenders); syncmedic's token is issued by
// the README's `argocd account generate-token` (after the test's own login: the README's is SSO); the serve block
// runs unchanged, its argocd-ca lines included, and so does its Slack block (the Slack test server's URL added).
// Then: both replicas of the image `make image` builds become Ready; syncmedic talks to argocd-server by its Service,
// verifying its self-signed certificate, and announces a hook that never finishes on the real Argo CD (a Kubernetes
// Event on the Application, the only incident, and one Slack thread); a HelmRelease's events reach syncmedic's
// Service through notification-controller and the Provider of manifests/flux, accepted with their HMAC signature;
// the incident page and the Argo CD extension are served, the incident API reached through argocd-server's proxy
// extension (checkExtension), the incident still the one open throughout; the README's uninstall leaves none of the
// install's objects.
func TestKustomizeInstallOnTheRealNode(t *testing.T) {
	n := testenv.RealNode(t)
	importSyncmedicImage(t, n)
	n.InstallFlux(t)
	n.InstallArgoCD(t)
	// The plugin alone first (docs/one-tool-installs.md): it renders, and brings no account. Then the README's
	// argocd/kustomization.yaml: install.yaml with the manifests/argocd-cmp component (the sidecar) and
	// manifests/components/argocd-account (serve's account).
	n.ApplyArgoCD(t, filepath.Join(repoRoot(t), "manifests", "argocd-cmp"))
	checkCMPRenders(t, n)
	checkPluginOnly(t, n)
	n.ApplyArgoCD(t, filepath.Join(repoRoot(t), "manifests", "argocd-cmp"), filepath.Join(repoRoot(t), "manifests", "components", "argocd-account"))
	work := workDir(t)
	issueSyncmedicToken(t, n, work)
	install := readmeBlock(t, readmeServeSection, 1) + "\n" + readmeBlock(t, readmeFluxSection, 1)
	audit := n.AuditOffset(t)
	t.Logf("install:\n%s", runShell(t, n, work, install))
	// Slack as the serve section's second block says. The test adds the Slack test server's URL (Slack itself is
	// out of reach here), relayed to the Pods from the host's loopback.
	slack := slackrec.New(t)
	u, err := url.Parse(slack.GetAPIURL())
	require.NoError(t, err)
	u.Host = n.ExposeToPods(t, u.Host)
	t.Logf("slack:\n%s", runShell(t, n, work, "kubectl -n syncmedic set env deploy/syncmedic SYNCMEDIC_SLACK_API_URL="+u.String()+"\n"+
		readmeBlock(t, readmeServeSection, 2)+"\nkubectl -n syncmedic rollout status deploy/syncmedic --timeout=3m"))
	checkInstalled(t, n, "syncmedic-kustomize")
	app := checkStuckHookAnnounced(t, n, kustomizeThreshold(t, n))
	checkSlackThread(t, slack, app)
	ops := recordOperation(n, app)
	checkExtension(t, n, work, app, kustomizeExtensionSide(t, n, work))
	checkIncidentStillOpen(t, n, app, ops())
	require.Len(t, slack.Roots(), 1, "still one thread: %s", slack.Summary())
	auditEnd := n.AuditOffset(t)
	t.Logf("uninstall:\n%s", runShell(t, n, work, readmeBlock(t, readmeUninstallSection, 1)))
	checkNothingLeft(t, n)
	grantsUsed(t, n, audit, auditEnd, kustomizeRBAC(t), true)
}

// workDir is the directory the README's commands run in: a link to manifests/ (and charts/) of this checkout, and
// the token files the Secret commands read (issueSyncmedicToken replaces argocd-token with a real one; the Helm
// install's syncmedic hands slack-token to the Slack test server, and the kustomize install has no Slack channel).
func workDir(t *testing.T) string {
	t.Helper()
	work := t.TempDir()
	for _, d := range []string{"manifests", "charts"} {
		require.NoError(t, os.Symlink(filepath.Join(repoRoot(t), d), filepath.Join(work, d)))
	}
	for _, f := range []string{"argocd-token", "slack-token"} {
		require.NoError(t, os.WriteFile(filepath.Join(work, f), []byte("unused here\n"), 0o600))
	}
	return work
}

// checkInstalled waits until both replicas of the syncmedic Deployment in namespace syncmedic are Ready, running
// the image `make image` built, then installs the HelmRelease release in flux-system (where the README's Alert
// watches them) and waits until syncmedic has accepted its signed events: helm-controller posts them to
// notification-controller, which forwards them through the Provider to the syncmedic Service.
func checkInstalled(t *testing.T, n *testenv.Node, release string) {
	t.Helper()
	ctx := context.Background()
	pods := waitSyncmedicReady(t, n)
	// notification-controller posts each event once (after a few quick retries). The install right after the other
	// test's uninstall lost its release's event, in a full run and again alone: its Service had a new ClusterIP,
	// which kube-proxy had not programmed yet, or which CoreDNS (its 30 s cache) did not answer yet; Argo CD's
	// repo-server was seen failing the first way ("network is unreachable"). So the test waits until the Service is
	// reachable from Pods, and still, every 40 s without an accepted event, upgrades the release (new values) so that
	// helm-controller posts another.
	n.WaitServiceReachable(t, "syncmedic", "syncmedic")
	chartRelease(t, n, testenv.FluxNamespace, chartsURL(t, n), release, "hello", "0.1.0")
	lastEvent, upgrades := time.Now(), 0
	poll(t, "Flux's events accepted by syncmedic", func() (bool, error) {
		if time.Since(lastEvent) > 40*time.Second {
			upgrades++
			hr := fluxObject("helm.toolkit.fluxcd.io/v2", "HelmRelease", testenv.FluxNamespace, release, nil)
			patch := []byte(fmt.Sprintf(`{"spec":{"values":{"upgrade":%d}}}`, upgrades))
			if err := n.Client.Patch(ctx, hr, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return false, err
			}
			lastEvent = time.Now()
			t.Logf("no event accepted within 40 s: upgraded %s (%d)", release, upgrades)
		}
		accepted, refused := 0, 0
		for _, p := range pods {
			m, err := podMetrics(ctx, n, p)
			if err != nil {
				return false, err
			}
			accepted += m[`syncmedic_events_received_total{result="accepted"}`]
			refused += m[`syncmedic_events_received_total{result="unauthorized"}`] + m[`syncmedic_events_received_total{result="malformed"}`]
		}
		require.Zero(t, refused, "no event refused")
		if accepted > 0 {
			t.Logf("syncmedic accepted %d signed Flux event(s) through its Service", accepted)
		}
		return accepted > 0, fmt.Errorf("accepted %d", accepted)
	})
}

// chartURLs are the Helm repositories ServeChartsOnNode serves in flux-system, by node.
var chartURLs = map[*testenv.Node]string{}

// chartsURL serves the chart hello 0.1.0 in flux-system on first use and returns the repository's URL.
func chartsURL(t *testing.T, n *testenv.Node) string {
	t.Helper()
	if chartURLs[n] == "" {
		chartURLs[n] = fluxreal.ServeChartsOnNode(t, n, testenv.FluxNamespace, fluxreal.ConfigMapChart("hello", "0.1.0"))
	}
	return chartURLs[n]
}

// checkNothingLeft waits until none of the install's objects is left: the namespace syncmedic (with everything in
// it), the ClusterRole and its binding, the Provider, the Alert and their Secret in flux-system.
func checkNothingLeft(t *testing.T, n *testenv.Node) {
	t.Helper()
	ctx := context.Background()
	core := n.Clientset.CoreV1()
	poll(t, "nothing of the install left", func() (bool, error) {
		var left []string
		if _, err := core.Namespaces().Get(ctx, "syncmedic", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("Namespace syncmedic (%v)", err))
		}
		if _, err := n.Clientset.RbacV1().ClusterRoles().Get(ctx, "syncmedic", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ClusterRole syncmedic")
		}
		if _, err := n.Clientset.RbacV1().ClusterRoleBindings().Get(ctx, "syncmedic", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ClusterRoleBinding syncmedic")
		}
		if _, err := core.Secrets(testenv.FluxNamespace).Get(ctx, "syncmedic-flux-hmac", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "Secret flux-system/syncmedic-flux-hmac")
		}
		for _, kind := range []string{"Provider", "Alert"} {
			o := &unstructured.Unstructured{}
			o.SetAPIVersion("notification.toolkit.fluxcd.io/v1beta3")
			o.SetKind(kind)
			if err := n.Client.Get(ctx, client.ObjectKey{Namespace: testenv.FluxNamespace, Name: "syncmedic"}, o); !apierrors.IsNotFound(err) {
				left = append(left, kind+" flux-system/syncmedic")
			}
		}
		return len(left) == 0, fmt.Errorf("left: %v", left)
	})
}

// metricLine is one sample of the Prometheus text format without labels' spaces: name{labels} value.
var metricLine = regexp.MustCompile(`^(\S+) (\S+)$`)

// podMetrics reads the Pod's /metrics on port 9293 (--metrics-addr) through the apiserver's Pod proxy and returns the integer
// samples by series.
func podMetrics(ctx context.Context, n *testenv.Node, p corev1.Pod) (map[string]int, error) {
	b, err := n.Clientset.CoreV1().Pods(p.Namespace).ProxyGet("http", p.Name, "9293", "/metrics", nil).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := metricLine.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "#") {
			if v, err := strconv.ParseFloat(m[2], 64); err == nil {
				out[m[1]] = int(v)
			}
		}
	}
	return out, nil
}
