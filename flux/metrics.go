package flux

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of a request to the receiver, the values of the result label of syncmedic_events_received_total.
const (
	ResultAccepted         = "accepted"
	ResultMalformed        = "malformed"
	ResultUnauthorized     = "unauthorized"
	ResultTooLarge         = "too_large"
	ResultMethodNotAllowed = "method_not_allowed"
	ResultThrottled        = "throttled"
	ResultUnavailable      = "unavailable"
	ResultUnsupportedMedia = "unsupported_media_type"
	ResultStale            = "stale"
	ResultDuplicate        = "duplicate"
)

var allResults = []string{ResultAccepted, ResultMalformed, ResultUnauthorized, ResultTooLarge,
	ResultMethodNotAllowed, ResultThrottled, ResultUnavailable, ResultUnsupportedMedia, ResultStale, ResultDuplicate}

// newEventsCounter registers syncmedic_events_received_total{result} with reg (or reuses the one already there),
// with every result pre-set to zero so dashboards see the series before the first event.
func newEventsCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "syncmedic_events_received_total",
		Help: "Flux events received on /flux/events, by result (accepted, malformed, unauthorized, too_large, method_not_allowed, throttled, unavailable, unsupported_media_type, stale, duplicate).",
	}, []string{"result"})
	if reg != nil {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
			if !ok {
				return nil, err
			}
			c = existing
		}
	}
	for _, r := range allResults {
		c.WithLabelValues(r)
	}
	return c, nil
}
