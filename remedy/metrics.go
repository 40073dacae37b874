package remedy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
)

// Metrics are the remediation stage's Prometheus collectors.
type Metrics struct {
	remediations *prometheus.CounterVec
}

// NewMetrics creates syncmedic_remediations_total{rule,action,result} and registers it with reg (nil: not
// registered). docs/metrics.md documents it; incident.NewMetrics has the incident gauges.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{remediations: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "syncmedic_remediations_total", Help: "Remediation attempts by rule, action and result (succeeded, failed, dry-run).",
	}, []string{"rule", "action", "result"})}
	if reg != nil {
		reg.MustRegister(m.remediations)
	}
	return m
}

func (m *Metrics) remediation(rule syncmedic.RuleID, action syncmedic.ActionID, result incident.AttemptResult) {
	if m == nil {
		return
	}
	m.remediations.WithLabelValues(string(rule), string(action), string(result)).Inc()
}
