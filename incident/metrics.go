package incident

import (
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/silence"
)

// Metrics are the tracker's Prometheus collectors.
type Metrics struct {
	findings  *prometheus.GaugeVec
	open      prometheus.Gauge
	incidents *openIncidents
	silences  *prometheus.GaugeVec
	withheld  *prometheus.CounterVec
}

// OpenIncidentLabels are the labels of syncmedic_incident_open, in order. The object's labels are prefixed object_
// because namespace, pod and instance are the labels Prometheus gives the scrape target (a ServiceMonitor adds
// namespace), which a series' own labels would collide with.
var OpenIncidentLabels = []string{"rule", "severity", "object_kind", "object_namespace", "object_name", "app"}

// NewMetrics creates the tracker's collectors and registers them with reg (nil: not registered):
// syncmedic_findings{rule}, syncmedic_incidents_open, syncmedic_incident_open{rule,severity,object_kind,
// object_namespace,object_name,app}, syncmedic_silences{state}, syncmedic_notifications_suppressed_total{event} and
// syncmedic_build_info{version,revision,goversion} (remedy.NewMetrics has
// syncmedic_remediations_total). docs/metrics.md documents each.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		findings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "syncmedic_findings", Help: "Findings matching in their subject's latest evaluation, by rule.",
		}, []string{"rule"}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "syncmedic_incidents_open", Help: "Incidents not resolved.",
		}),
		incidents: &openIncidents{desc: prometheus.NewDesc("syncmedic_incident_open",
			"Open incidents by rule, severity and object (kind, namespace, name, and the Argo CD Application or Flux HelmRelease); "+
				"a series exists only while an incident is open.", OpenIncidentLabels, nil)},
		silences: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "syncmedic_silences", Help: "Silences kept, by state (active, pending, expired).",
		}, []string{"state"}),
		withheld: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncmedic_notifications_suppressed_total", Help: "Incident transitions a silence kept from the notifiers, by event.",
		}, []string{"event"}),
	}
	for _, st := range []silence.State{silence.StateActive, silence.StatePending, silence.StateExpired} {
		m.silences.WithLabelValues(string(st))
	}
	for _, k := range []EventKind{EventOpened, EventUpdated, EventRemediating, EventRemediated, EventResolved} {
		m.withheld.WithLabelValues(string(k))
	}
	if reg != nil {
		reg.MustRegister(m.findings, m.open, m.incidents, m.silences, m.withheld, newBuildInfo())
	}
	return m
}

// setSilences sets syncmedic_silences from the silences kept.
func (m *Metrics) setSilences(ss map[string]*silence.Silence, now time.Time) {
	if m == nil {
		return
	}
	n := map[silence.State]int{}
	for _, s := range ss {
		n[s.State(now)]++
	}
	for _, st := range []silence.State{silence.StateActive, silence.StatePending, silence.StateExpired} {
		m.silences.WithLabelValues(string(st)).Set(float64(n[st]))
	}
}

// suppressed counts one transition a silence withheld.
func (m *Metrics) suppressed(kind EventKind) {
	if m == nil {
		return
	}
	m.withheld.WithLabelValues(string(kind)).Inc()
}

func (m *Metrics) setIncidents(incidents map[string]*Incident) {
	if m == nil {
		return
	}
	open := 0
	byRule := map[syncmedic.RuleID]int{}
	for _, r := range syncmedic.Rules() {
		byRule[r.ID] = 0
	}
	series := map[string]*openSeries{}
	for _, inc := range incidents {
		if !inc.IsOpen() {
			continue
		}
		open++
		if inc.Misses == 0 {
			byRule[inc.Finding.Rule]++
		}
		labels := incidentLabels(inc.Finding)
		key := strings.Join(labels, "\x00")
		if s, ok := series[key]; ok {
			s.n++ // the same object and rule seen through two Argo CD instances
			continue
		}
		series[key] = &openSeries{labels: labels, n: 1}
	}
	m.open.Set(float64(open))
	for rule, n := range byRule {
		m.findings.WithLabelValues(string(rule)).Set(float64(n))
	}
	m.incidents.set(series)
}

// incidentLabels returns the values of OpenIncidentLabels for f.
func incidentLabels(f syncmedic.Finding) []string {
	o := f.Object
	app := o.App
	if app == "" && o.Tool == syncmedic.ToolFlux {
		_, app, _ = o.HelmRelease()
	}
	return []string{string(f.Rule), f.Severity.String(), o.Kind, o.Namespace, o.Name, app}
}

// openIncidents is syncmedic_incident_open: the series are replaced as a whole at each evaluation, so a scrape sees
// exactly the incidents open then, and a resolved incident's series disappears instead of staying at 0.
type openIncidents struct {
	desc   *prometheus.Desc
	mu     sync.Mutex
	series []*openSeries
}

type openSeries struct {
	labels []string
	n      int
}

func (c *openIncidents) set(series map[string]*openSeries) {
	out := make([]*openSeries, 0, len(series))
	for _, s := range series {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i].labels, "\x00") < strings.Join(out[j].labels, "\x00") })
	c.mu.Lock()
	c.series = out
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *openIncidents) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *openIncidents) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	series := c.series
	c.mu.Unlock()
	for _, s := range series {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(s.n), s.labels...)
	}
}

// newBuildInfo is syncmedic_build_info{version,revision,goversion} 1: Version, the VCS revision the binary was
// built from ("unknown" when it was not stamped) and the Go version.
func newBuildInfo() prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "syncmedic_build_info", Help: "A constant 1, labelled with the syncmedic version, the VCS revision it was built from and the Go version.",
		ConstLabels: prometheus.Labels{"version": syncmedic.Version, "revision": revision, "goversion": runtime.Version()},
	}, func() float64 { return 1 })
}
