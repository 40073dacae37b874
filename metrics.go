package syncmedic

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the tracker's Prometheus collectors.
type Metrics struct {
	findings     *prometheus.GaugeVec
	open         prometheus.Gauge
	remediations *prometheus.CounterVec
}

// NewMetrics creates the tracker's collectors and registers them with reg (nil: not registered):
// syncmedic_findings{rule}, syncmedic_incidents_open and syncmedic_remediations_total{rule,action,result}.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		findings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "syncmedic_findings", Help: "Findings matching in their subject's latest evaluation, by rule.",
		}, []string{"rule"}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "syncmedic_incidents_open", Help: "Incidents not resolved.",
		}),
		remediations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncmedic_remediations_total", Help: "Remediation attempts by rule, action and result (succeeded, failed, dry-run).",
		}, []string{"rule", "action", "result"}),
	}
	if reg != nil {
		reg.MustRegister(m.findings, m.open, m.remediations)
	}
	return m
}

func (m *Metrics) setIncidents(incidents map[string]*Incident) {
	if m == nil {
		return
	}
	open := 0
	byRule := map[RuleID]int{}
	for _, r := range Rules() {
		byRule[r.ID] = 0
	}
	for _, inc := range incidents {
		if !inc.IsOpen() {
			continue
		}
		open++
		if inc.Misses == 0 {
			byRule[inc.Finding.Rule]++
		}
	}
	m.open.Set(float64(open))
	for rule, n := range byRule {
		m.findings.WithLabelValues(string(rule)).Set(float64(n))
	}
}

func (m *Metrics) remediation(rule RuleID, action ActionID, result AttemptResult) {
	if m == nil {
		return
	}
	m.remediations.WithLabelValues(string(rule), string(action), string(result)).Inc()
}
