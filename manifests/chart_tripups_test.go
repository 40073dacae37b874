package manifests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestTheChartTrustsArgoCDsOwnCertificateByDefault renders the chart with only the suggested in-cluster address: it
// must verify argocd-server against the CA Secret (Argo CD's default certificate is self-signed, which the system
// roots refuse), from a volume that is optional so a missing Secret does not leave the Pod in ContainerCreating
// (serve then exits naming --argocd-ca-file), and an empty Secret name is refused when rendering.
func TestTheChartTrustsArgoCDsOwnCertificateByDefault(t *testing.T) {
	const server = "argocd-server.argocd.svc:443"
	d := deployment(t, helmTemplate(t, "syncmedic", "syncmedic", "argocd.server="+server))
	c := d.Spec.Template.Spec.Containers[0]
	require.Contains(t, c.Args, "--argocd-server="+server)
	require.Contains(t, c.Args, "--argocd-ca-file=/etc/syncmedic/argocd-ca/ca.crt")
	v := volume(d, "argocd-ca")
	require.NotNil(t, v)
	require.Equal(t, "syncmedic-argocd-ca", v.Secret.SecretName)
	require.NotNil(t, v.Secret.Optional)
	require.True(t, *v.Secret.Optional, "a missing CA Secret must not keep the Pod from starting")

	for _, set := range []string{"argocd.tls.caSecret=", "argocd.tls.caKey="} {
		_, err := runHelm(t, "syncmedic", "syncmedic", "argocd.server="+server, set, "--skip-schema-validation")
		require.ErrorContains(t, err, "argocd.tls.mode=ca needs argocd.tls.caSecret and argocd.tls.caKey", set)
	}
}

// TestTheChartSchemaRefusesMisspelledKeysAtEveryLevel sets a misspelled key under each object of values.yaml: helm
// template and helm lint refuse each, naming it, instead of ignoring it.
func TestTheChartSchemaRefusesMisspelledKeysAtEveryLevel(t *testing.T) {
	for _, set := range []string{
		"image.tags=v1", "namespace.crate=true", "secrets.slackTokne=x", "argocd.sever=x:443", "argocd.tls.mod=ca",
		"flux.namespaces=flux", "slack.chanel=x", "podDisruptionBudget.minAvailble=1", "networkPolicy.enable=false",
		"networkPolicy.prometheus.namespaces=obs", "serviceMonitor.intervall=1m", "prometheusRule.enable=true",
		"dashboard.enable=true", "incidentAPI.argocdServer.namespaces=argo",
	} {
		key := set[strings.LastIndex(set[:strings.Index(set, "=")], ".")+1 : strings.Index(set, "=")]
		t.Run(set, func(t *testing.T) {
			_, err := runHelm(t, "syncmedic", "syncmedic", set)
			require.ErrorContains(t, err, "additional properties '"+key+"' not allowed")
			out, err := testenv.HelmCommand(t, "lint", "--strict", chartDir, "--set", set).CombinedOutput()
			require.Error(t, err, "%s", out)
			require.Contains(t, string(out), "additional properties '"+key+"' not allowed")
		})
	}
	t.Run("the free-form maps stay open", func(t *testing.T) {
		_, err := runHelm(t, "syncmedic", "syncmedic", "podLabels.team=sre", "serviceMonitor.labels.release=kube-prometheus-stack",
			"prometheusRule.labels.release=kube-prometheus-stack", "networkPolicy.prometheus.podLabels.app=prom")
		require.NoError(t, err)
	})
}

// renderNotes renders the chart's NOTES.txt with set (helm template leaves NOTES out, and helm install --dry-run
// needs a cluster): a copy of the chart gets a template that puts NOTES.txt's text into a ConfigMap.
func renderNotes(t *testing.T, set ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "syncmedic")
	require.NoError(t, os.CopyFS(dir, os.DirFS(chartDir)))
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "_notes_test.tpl"),
		[]byte(`{{- define "notes-test" -}}`+string(notes)+`{{- end -}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "notes-test.yaml"), []byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes-test}\ndata:\n  notes: {{ include \"notes-test\" . | quote }}\n"), 0o644))
	args := []string{"template", "syncmedic", dir, "--namespace", "syncmedic", "--show-only", "templates/notes-test.yaml"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := testenv.HelmCommand(t, args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var cm corev1.ConfigMap
	convert(t, decodeObjects(t, out)[0], &cm)
	return cm.Data["notes"]
}

// TestTheChartNotesKeepTheArgoCDPolicyAndNameEverySecretKey renders NOTES.txt with Argo CD, Slack and the incident
// API on: the argo-cd chart values it prints add the RBAC line as an extra policy.syncmedic-extension.csv key (policy.csv would
// replace the user's own policy), and the Secret command creates every key serve then reads.
func TestTheChartNotesKeepTheArgoCDPolicyAndNameEverySecretKey(t *testing.T) {
	notes := renderNotes(t, "argocd.server=argocd-server.argocd.svc:443", "slack.channel=#gitops", "incidentAPI.enabled=true")
	require.Contains(t, notes, "policy.syncmedic-extension.csv: |")
	require.NotContains(t, notes, " policy.csv:")
	for _, key := range []string{"flux-hmac-token=", "argocd-token=", "slack-token=", "api-token=", "proxy-token="} {
		require.Contains(t, notes, "--from-", key)
		require.Contains(t, notes, key)
	}
	minimal := renderNotes(t)
	require.Contains(t, minimal, "flux-hmac-token=")
	require.NotContains(t, minimal, "slack-token=", "a key serve does not read is not asked for")
}

// TestTheChartAdmitsPrometheusOnlyToTheMetricsPort renders the chart with its default NetworkPolicy and the
// ServiceMonitor: Prometheus (namespace monitoring) is admitted to port 9293 and to nothing else, which serves
// /metrics, /healthz and /readyz (--metrics-addr=:9293, the probes' port); the ServiceMonitor scrapes that port.
func TestTheChartAdmitsPrometheusOnlyToTheMetricsPort(t *testing.T) {
	objs := helmTemplate(t, "syncmedic", "syncmedic", "serviceMonitor.enabled=true")
	var np networkingv1.NetworkPolicy
	convert(t, find(t, objs, "NetworkPolicy", "syncmedic-receiver"), &np)
	var prometheusPorts []int32
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.From {
			if p.PodSelector != nil && p.PodSelector.MatchLabels["app.kubernetes.io/name"] == "prometheus" {
				for _, port := range rule.Ports {
					prometheusPorts = append(prometheusPorts, port.Port.IntVal)
				}
			}
		}
	}
	require.Equal(t, []int32{9293}, prometheusPorts, "Prometheus reaches /metrics, never the API and receivers on 9292")
	c := deployment(t, objs).Spec.Template.Spec.Containers[0]
	require.Contains(t, c.Args, "--metrics-addr=:9293")
	require.Equal(t, "metrics", c.ReadinessProbe.HTTPGet.Port.StrVal)
	require.Equal(t, "metrics", c.LivenessProbe.HTTPGet.Port.StrVal)
	eps, _, _ := unstructured.NestedSlice(find(t, objs, "ServiceMonitor", "syncmedic").Object, "spec", "endpoints")
	require.Equal(t, "metrics", eps[0].(map[string]interface{})["port"])
}

// TestTheChartNetworkPolicyAdmitsConfiguredScrapers renders the receiver NetworkPolicy with Prometheus elsewhere
// than namespace monitoring (peers given as from) and an extra peer: Prometheus is admitted to the metrics port 9293
// only, notification-controller and the extra peer to 9292 only.
func TestTheChartNetworkPolicyAdmitsConfiguredScrapers(t *testing.T) {
	objs := helmTemplate(t, "syncmedic", "syncmedic",
		"networkPolicy.prometheus.from[0].namespaceSelector.matchLabels.observability=enabled",
		"networkPolicy.extraFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=debug")
	var np networkingv1.NetworkPolicy
	convert(t, find(t, objs, "NetworkPolicy", "syncmedic-receiver"), &np)
	var peers []map[string]string
	var ports []int32
	for _, rule := range np.Spec.Ingress {
		require.Len(t, rule.Ports, 1)
		for _, p := range rule.From {
			require.NotNil(t, p.NamespaceSelector)
			peers = append(peers, p.NamespaceSelector.MatchLabels)
			ports = append(ports, rule.Ports[0].Port.IntVal)
		}
	}
	require.Equal(t, []int32{9292, 9293, 9292}, ports, "notification-controller and the extra peer on 9292, Prometheus on 9293")
	require.Equal(t, []map[string]string{
		{"kubernetes.io/metadata.name": "flux-system"},
		{"observability": "enabled"},
		{"kubernetes.io/metadata.name": "debug"},
	}, peers, "notification-controller, the configured Prometheus peers instead of namespace monitoring, the extra peer")
}

// TestMakeTestLintsAndPackagesTheChart checks that `make test` runs the chart target, then runs that target with the
// test's helm into a temporary directory: helm lint --strict passes and helm package writes the chart archive a
// release pushes (docs/install-helm.md, "Install with Helm").
func TestMakeTestLintsAndPackagesTheChart(t *testing.T) {
	// `make -n` still runs the lines that call $(MAKE) (hack/phase.sh with the sub-make): their phase times go to a
	// file of this test, not to the bin/test-phases.txt of the `make test` that may be running this test.
	dryRun, err := exec.Command("make", "-C", "..", "-n", "test", "PHASES="+filepath.Join(t.TempDir(), "phases")).CombinedOutput()
	require.NoError(t, err, "%s", dryRun)
	require.Regexp(t, `(?m)^'[^']*/helm' lint --strict charts/syncmedic$`, string(dryRun))
	require.Regexp(t, `(?m)^'[^']*/helm' package charts/syncmedic --destination '[^']*'$`, string(dryRun))

	helm := testenv.HelmCommand(t, "version").Path
	dist := t.TempDir()
	cmd := exec.Command("make", "-C", "..", "chart", "HELM="+helm, "CHART_DIST="+dist)
	cmd.Env = testenv.HelmCommand(t).Env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "1 chart(s) linted, 0 chart(s) failed")
	chart, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	version := regexp.MustCompile(`(?m)^version:\s*(\S+)`).FindSubmatch(chart)
	require.NotNil(t, version)
	pkg := filepath.Join(dist, "syncmedic-"+string(version[1])+".tgz")
	require.FileExists(t, pkg)
	objs := decodeObjects(t, func() []byte {
		out, err := testenv.HelmCommand(t, "template", "syncmedic", pkg, "--namespace", "syncmedic").Output()
		require.NoError(t, err)
		return out
	}())
	require.Equal(t, identities(helmTemplate(t, "syncmedic", "syncmedic")), identities(objs), "the package renders what the directory renders")
}
