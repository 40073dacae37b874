package main

import (
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metricsRegistry is serve's Prometheus registry. It keeps the name and labels of everything registered, which a
// prometheus.Registry does not list (a vector without series is not gathered), so that a test can hold
// docs/metrics.md to what serve exports.
type metricsRegistry struct {
	*prometheus.Registry
	mu      sync.Mutex
	metrics map[string][]string
}

var _ prometheus.Registerer = (*metricsRegistry)(nil)

func newMetricsRegistry() *metricsRegistry {
	return &metricsRegistry{Registry: prometheus.NewRegistry(), metrics: map[string][]string{}}
}

// descPattern reads a Desc's name, constant labels and variable labels from its String form.
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: ".*", constLabels: \{(.*)\}, variableLabels: \{([^{}]*)\}\}$`)

// Register registers c and records what it describes.
func (r *metricsRegistry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range ch {
		m := descPattern.FindStringSubmatch(d.String())
		if m == nil {
			r.metrics[d.String()] = nil
			continue
		}
		var labels []string
		for _, kv := range strings.Split(m[2], ",") {
			if k, _, ok := strings.Cut(kv, "="); ok {
				labels = append(labels, k)
			}
		}
		if m[3] != "" {
			labels = append(labels, strings.Split(m[3], ",")...)
		}
		sort.Strings(labels)
		r.metrics[m[1]] = labels
	}
	return nil
}

// MustRegister registers every collector, panicking on the first error, as prometheus.Registry does.
func (r *metricsRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// registered returns the name and labels of every metric registered so far.
func (r *metricsRegistry) registered() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]string, len(r.metrics))
	for k, v := range r.metrics {
		out[k] = v
	}
	return out
}
