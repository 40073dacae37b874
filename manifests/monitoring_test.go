package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/notify"
	"github.com/syncmedic/syncmedic/remedy"
)

// installMonitoringCRDs installs the ServiceMonitor and PrometheusRule CRDs of the prometheus-operator, copied from its
// module by `make tools-helm`, into env.
func installMonitoringCRDs(t *testing.T, env *testenv.Env) {
	t.Helper()
	bin, err := testenv.BinDir()
	require.NoError(t, err)
	dir := filepath.Join(bin, "crds-prometheus-operator")
	if _, err := os.Stat(filepath.Join(dir, "monitoring.coreos.com_servicemonitors.yaml")); err != nil {
		t.Fatalf("prometheus-operator CRDs not found in %s: run `make tools-helm` first", dir)
	}
	_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true})
	require.NoError(t, err)
}

// monitoringKustomization is base plus the monitoring component, as the component's comment tells users to write.
func monitoringKustomization(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string { // kustomize refuses absolute paths
		a, err := filepath.Abs(p)
		require.NoError(t, err)
		r, err := filepath.Rel(dir, a)
		require.NoError(t, err)
		return r
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources: ["+rel("base")+"]\n"+
		"components: ["+rel(filepath.Join("components", "monitoring"))+"]\n"), 0o644))
	return build(t, dir)
}

func TestMonitoringComponent(t *testing.T) {
	objs := monitoringKustomization(t)
	sm := find(t, objs, "ServiceMonitor", "syncmedic")
	rule := find(t, objs, "PrometheusRule", "syncmedic")
	dashboard := find(t, objs, "ConfigMap", "syncmedic-dashboard")

	t.Run("it lands in the base's namespace", func(t *testing.T) {
		for _, o := range []*unstructured.Unstructured{sm, rule, dashboard} {
			require.Equal(t, "syncmedic", o.GetNamespace(), o.GetKind())
		}
	})

	t.Run("the ServiceMonitor scrapes /metrics on the Service's metrics port", func(t *testing.T) {
		svc := find(t, objs, "Service", "syncmedic")
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		for k, v := range sel {
			require.Equal(t, v, svc.GetLabels()[k], "the selector matches the Service's label %s", k)
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		require.Len(t, eps, 1)
		ep := eps[0].(map[string]interface{})
		require.Equal(t, "metrics", ep["port"])
		require.Equal(t, "/metrics", ep["path"])
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		require.Len(t, ports, 2)
		require.Equal(t, "http", ports[0].(map[string]interface{})["name"])
		require.Equal(t, "metrics", ports[1].(map[string]interface{})["name"])
		require.EqualValues(t, 9293, ports[1].(map[string]interface{})["port"])
	})

	t.Run("the NetworkPolicy admits Prometheus to the metrics port only", func(t *testing.T) {
		np := find(t, objs, "NetworkPolicy", "syncmedic-receiver")
		ingress, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
		var prometheusPorts []string
		for _, in := range ingress {
			b, err := json.Marshal(in)
			require.NoError(t, err)
			if strings.Contains(string(b), `"app.kubernetes.io/name":"prometheus"`) {
				ports, _ := json.Marshal(in.(map[string]interface{})["ports"])
				prometheusPorts = append(prometheusPorts, string(ports))
			}
		}
		require.Equal(t, []string{`[{"port":9293,"protocol":"TCP"}]`}, prometheusPorts, "Prometheus reaches 9293 (/metrics), never 9292 (the API and receivers): %v", ingress)
	})

	t.Run("the dashboard ConfigMap carries the Grafana sidecar label and valid JSON", func(t *testing.T) {
		require.Equal(t, "1", dashboard.GetLabels()["grafana_dashboard"])
		data, _, _ := unstructured.NestedStringMap(dashboard.Object, "data")
		var d map[string]interface{}
		require.NoError(t, json.Unmarshal([]byte(data["syncmedic.json"]), &d))
		require.Equal(t, "syncmedic", d["uid"])
	})

	t.Run("everything applies to a real apiserver with the prometheus-operator's CRDs", func(t *testing.T) {
		env := testenv.Kube(t)
		installMonitoringCRDs(t, env)
		apply(t, env.Client, objs)
	})
}

func TestTheChartShipsTheMonitoringComponentsFiles(t *testing.T) {
	for _, file := range []string{"prometheusrule.yaml", "dashboard.json"} {
		t.Run(file+" in the chart is the component's", func(t *testing.T) {
			require.Equal(t, readFile(t, filepath.Join("components", "monitoring", file)), readFile(t, filepath.Join(chartDir, "files", file)),
				"copy manifests/components/monitoring/%s to charts/syncmedic/files/", file)
		})
	}
	t.Run("the chart renders the component's alerts, scraping the release's Service", func(t *testing.T) {
		chart := helmTemplate(t, "syncmedic", "syncmedic", "prometheusRule.enabled=true", "serviceMonitor.enabled=true")
		kustomize := monitoringKustomization(t)
		c, _, _ := unstructured.NestedFieldCopy(find(t, chart, "PrometheusRule", "syncmedic").Object, "spec")
		k, _, _ := unstructured.NestedFieldCopy(find(t, kustomize, "PrometheusRule", "syncmedic").Object, "spec")
		require.Equal(t, k, c)
		ce, _, _ := unstructured.NestedSlice(find(t, chart, "ServiceMonitor", "syncmedic").Object, "spec", "endpoints")
		ke, _, _ := unstructured.NestedSlice(find(t, kustomize, "ServiceMonitor", "syncmedic").Object, "spec", "endpoints")
		require.Equal(t, ke, ce)
	})
}

// metricRecorder is a prometheus.Registerer that keeps the name and labels of every metric described to it.
type metricRecorder map[string][]string

var _ prometheus.Registerer = metricRecorder(nil)

var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^{}]*)\}\}$`)

func (r metricRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		m := descPattern.FindStringSubmatch(d.String())
		if m == nil {
			panic("unexpected Desc format: " + d.String())
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		r[m[1]] = labels
	}
	return nil
}

func (r metricRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r metricRecorder) Unregister(prometheus.Collector) bool { return false }

// exportedMetrics returns the metrics syncmedic serve registers, with their labels: those of the tracker, the
// remediation stage, the notification dispatcher and the Flux receiver from their constructors; the Argo CD watcher's
// are registered by cmd/syncmedic (package main, which a test cannot import), so those names are read from its sources.
func exportedMetrics(t *testing.T) metricRecorder {
	t.Helper()
	rec := metricRecorder{}
	incident.NewMetrics(rec)
	remedy.NewMetrics(rec)
	notify.NewDispatcher(notify.DispatcherOptions{Registerer: rec})
	_, err := flux.NewReceiver(flux.ReceiverOptions{Token: []byte("monitoring-test-token"), Metrics: rec})
	require.NoError(t, err)
	require.NotEmpty(t, rec)

	files, err := filepath.Glob(filepath.Join("..", "cmd", "syncmedic", "*.go"))
	require.NoError(t, err)
	literal := regexp.MustCompile(`"(syncmedic_[a-z0-9_]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, m := range literal.FindAllStringSubmatch(readFile(t, f), -1) {
			if _, ok := rec[m[1]]; !ok {
				rec[m[1]] = nil // labels unknown: not checked
			}
		}
	}
	return rec
}

// queries returns every PromQL expression of the PrometheusRule and the dashboard (panel targets and variables).
func queries(t *testing.T) map[string][]string {
	t.Helper()
	rule := find(t, monitoringKustomization(t), "PrometheusRule", "syncmedic")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	var ruleExprs []string
	for _, g := range groups {
		for _, r := range g.(map[string]interface{})["rules"].([]interface{}) {
			ruleExprs = append(ruleExprs, r.(map[string]interface{})["expr"].(string))
		}
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal([]byte(readFile(t, filepath.Join("components", "monitoring", "dashboard.json"))), &dashboard))
	var dashExprs []string
	for _, p := range dashboard.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, target := range p.Targets {
			dashExprs = append(dashExprs, target.Expr)
		}
	}
	for _, v := range dashboard.Templating.List {
		if v.Definition != "" {
			dashExprs = append(dashExprs, v.Definition)
		}
	}
	return map[string][]string{"the PrometheusRule": ruleExprs, "the dashboard": dashExprs}
}

var (
	metricName = regexp.MustCompile(`\bsyncmedic_[a-z0-9_]+\b`)
	// selector is a metric with its label matchers; matcher is one label name in them.
	selector = regexp.MustCompile(`\b(syncmedic_[a-z0-9_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// byClause is the label list of a "by (…)" aggregation.
	byClause = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
)

// targetLabels are the labels Prometheus adds to every scraped series (job, namespace, pod, … from the
// ServiceMonitor's target), valid on any metric.
var targetLabels = map[string]bool{"job": true, "namespace": true, "pod": true, "instance": true, "service": true, "endpoint": true, "container": true}

func TestMonitoringQueriesUseOnlyMetricsSyncmedicExports(t *testing.T) {
	exported := exportedMetrics(t)
	for where, exprs := range queries(t) {
		t.Run("every metric in "+where+" is registered by syncmedic serve", func(t *testing.T) {
			used := map[string]bool{}
			for _, e := range exprs {
				for _, name := range metricName.FindAllString(e, -1) {
					used[name] = true
					_, ok := exported[name]
					require.True(t, ok, "%s uses %s, which syncmedic does not export (it exports %v)", where, name, sortedKeys(exported))
				}
			}
			require.GreaterOrEqual(t, len(used), 4, "%s names syncmedic's metrics", where)
		})
		t.Run("every label matched or grouped by in "+where+" is one the metric has", func(t *testing.T) {
			for _, e := range exprs {
				for _, sel := range selector.FindAllStringSubmatch(e, -1) {
					known, ok := exported[sel[1]]
					if !ok || known == nil {
						continue // an unknown metric fails the test above; the Argo CD metrics' labels are unknown here
					}
					for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
						require.True(t, targetLabels[m[1]] || slices.Contains(known, m[1]), "%s: %s has no label %s (labels: %v)", e, sel[1], m[1], known)
					}
				}
				names := metricName.FindAllString(e, -1)
				if len(names) != 1 {
					continue // "by" over several metrics: not attributable to one
				}
				known := exported[names[0]]
				if known == nil {
					continue
				}
				for _, by := range byClause.FindAllStringSubmatch(e, -1) {
					for _, l := range strings.Split(by[1], ",") {
						l = strings.TrimSpace(l)
						require.True(t, targetLabels[l] || slices.Contains(known, l), "%s: %s has no label %s to group by (labels: %v)", e, names[0], l, known)
					}
				}
			}
		})
	}
	t.Run("the rule's alert on absence watches the scrape target syncmedic's ServiceMonitor creates", func(t *testing.T) {
		exprs := queries(t)["the PrometheusRule"]
		var found bool
		for _, e := range exprs {
			found = found || strings.Contains(e, `up{job="syncmedic"}`)
		}
		require.True(t, found, "the job of a ServiceMonitor target is the Service's name, syncmedic")
	})
}

func sortedKeys(m metricRecorder) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestEveryAlertHasARunbook checks that each alert of the PrometheusRule links, with runbook_url, to its own section
// of docs/runbooks.md.
func TestEveryAlertHasARunbook(t *testing.T) {
	const prefix = "https://github.com/syncmedic/syncmedic/blob/main/docs/runbooks.md#"
	headings := map[string]bool{}
	for _, line := range strings.Split(readFile(t, filepath.Join("..", "docs", "runbooks.md")), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			headings[strings.ToLower(h)] = true
		}
	}
	rule := find(t, monitoringKustomization(t), "PrometheusRule", "syncmedic")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	alerts := 0
	for _, g := range groups {
		for _, r := range g.(map[string]interface{})["rules"].([]interface{}) {
			alert, _, _ := unstructured.NestedString(r.(map[string]interface{}), "alert")
			url, _, _ := unstructured.NestedString(r.(map[string]interface{}), "annotations", "runbook_url")
			require.Equal(t, prefix+strings.ToLower(alert), url, "alert %s", alert)
			require.True(t, headings[strings.ToLower(alert)], "docs/runbooks.md has no section ## %s", alert)
			alerts++
		}
	}
	require.Equal(t, len(headings), alerts, "every section of docs/runbooks.md is an alert's")
}
