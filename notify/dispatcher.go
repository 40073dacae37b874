package notify

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncmedic/syncmedic"
)

// Destination is one named notifier ("slack", "webhook", "kubernetes-events").
type Destination struct {
	Name     string
	Notifier Notifier
}

// DispatcherOptions configure a Dispatcher; zero fields take the defaults.
type DispatcherOptions struct {
	// QueueSize bounds each destination's queue (default 1000). An event that does not fit is logged and counted
	// (result "dropped"), never lost silently.
	QueueSize int
	// MinBackoff and MaxBackoff bound the exponential backoff between retries (defaults 1s and 5m); a destination's
	// Retry-After replaces the backoff.
	MinBackoff, MaxBackoff time.Duration
	Log                    *slog.Logger
	// Registerer receives syncmedic_notifications_total{notifier,result} and syncmedic_notification_queue_length.
	Registerer prometheus.Registerer
}

// Dispatcher fans incident events out to destinations, each with its own bounded queue and one worker, so a
// destination that is down delays only itself and every destination sees the events in the order published.
type Dispatcher struct {
	o      DispatcherOptions
	queues []*queue
	sent   *prometheus.CounterVec
	length *prometheus.GaugeVec
}

type queue struct {
	dest Destination
	ch   chan syncmedic.Event
}

var _ syncmedic.Publisher = (*Dispatcher)(nil)

// NewDispatcher returns a dispatcher for dests; call Run to deliver.
func NewDispatcher(o DispatcherOptions, dests ...Destination) *Dispatcher {
	if o.QueueSize <= 0 {
		o.QueueSize = 1000
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Minute, o.MinBackoff)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{o: o,
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncmedic_notifications_total",
			Help: "Notifications by notifier and result (sent, retried, failed, dropped).",
		}, []string{"notifier", "result"}),
		length: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "syncmedic_notification_queue_length", Help: "Events waiting per notifier.",
		}, []string{"notifier"}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(d.sent, d.length)
	}
	for _, dest := range dests {
		d.Add(dest)
	}
	return d
}

// Add adds a destination; call it before Run (a notifier that keeps notes in the tracker is built after the
// tracker, which needs the dispatcher first).
func (d *Dispatcher) Add(dest Destination) {
	d.queues = append(d.queues, &queue{dest: dest, ch: make(chan syncmedic.Event, d.o.QueueSize)})
}

// Publish queues ev for every destination without blocking.
func (d *Dispatcher) Publish(ev syncmedic.Event) {
	for _, q := range d.queues {
		select {
		case q.ch <- ev:
			d.length.WithLabelValues(q.dest.Name).Set(float64(len(q.ch)))
		default:
			d.sent.WithLabelValues(q.dest.Name, "dropped").Inc()
			d.o.Log.Error("notification queue full: event dropped", "notifier", q.dest.Name, "incident", ev.Incident.ID,
				"event", ev.Kind, "rule", ev.Incident.Finding.Rule, "queueSize", cap(q.ch))
		}
	}
}

// Run delivers until ctx is cancelled; events still queued then are logged as not delivered.
func (d *Dispatcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, q := range d.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.work(ctx, q)
		}()
	}
	wg.Wait()
}

func (d *Dispatcher) work(ctx context.Context, q *queue) {
	for {
		select {
		case <-ctx.Done():
			if n := len(q.ch); n > 0 {
				d.o.Log.Warn("shutting down with notifications not delivered", "notifier", q.dest.Name, "pending", n)
			}
			return
		case ev := <-q.ch:
			d.length.WithLabelValues(q.dest.Name).Set(float64(len(q.ch)))
			d.deliver(ctx, q.dest, ev)
		}
	}
}

// deliver retries ev until it is delivered, refused for good, or ctx ends. Later events wait: order is kept.
func (d *Dispatcher) deliver(ctx context.Context, dest Destination, ev syncmedic.Event) {
	log := d.o.Log.With("notifier", dest.Name, "incident", ev.Incident.ID, "event", ev.Kind, "rule", ev.Incident.Finding.Rule)
	backoff := d.o.MinBackoff
	for attempt := 1; ; attempt++ {
		retry, err := dest.Notifier.Notify(ctx, ev)
		if err == nil {
			d.sent.WithLabelValues(dest.Name, "sent").Inc()
			return
		}
		if !retry || ctx.Err() != nil {
			d.sent.WithLabelValues(dest.Name, "failed").Inc()
			log.Error("notification failed", "err", fmt.Errorf("attempt %d: %w", attempt, err), "retry", false)
			return
		}
		wait := backoff
		if ra, ok := RetryAfter(err); ok {
			wait = ra
		} else {
			backoff = min(backoff*2, d.o.MaxBackoff)
		}
		d.sent.WithLabelValues(dest.Name, "retried").Inc()
		log.Warn("notification will be retried", "err", fmt.Errorf("attempt %d: %w", attempt, err), "wait", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			d.sent.WithLabelValues(dest.Name, "failed").Inc()
			log.Warn("shutting down: notification not delivered", "attempts", attempt)
			return
		case <-t.C:
		}
	}
}
