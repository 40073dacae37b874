package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/syncmedic/syncmedic/incident"
)

// Destination is one named notifier ("slack", "webhook", "kubernetes-events", "alertmanager").
type Destination struct {
	Name     string
	Notifier Notifier
	// Timeout bounds each attempt, so a connection that never answers fails the attempt, which is retried, instead
	// of holding the destination; zero: DispatcherOptions.AttemptTimeout.
	Timeout time.Duration
	// Refresher, when set, is called every Refresher.RefreshInterval between deliveries, in the destination's own
	// worker so that it never overtakes a queued transition (Alertmanager forgets an alert not re-sent before its
	// endsAt).
	Refresher Refresher
}

// Refresher is a destination that must hear again about what is still open, or it forgets it.
type Refresher interface {
	// RefreshInterval is how often Refresh runs.
	RefreshInterval() time.Duration
	// Refresh re-sends what is still open. A failure is logged and counted; the next interval tries again.
	Refresh(ctx context.Context) error
}

// DispatcherOptions configure a Dispatcher; zero fields take the defaults.
type DispatcherOptions struct {
	// QueueSize bounds each destination's queue (default 1000). An event that does not fit is logged and counted
	// (result "dropped"), never lost silently.
	QueueSize int
	// MinBackoff and MaxBackoff bound the exponential backoff between retries (defaults 1s and 5m); a destination's
	// Retry-After replaces the backoff. Retries never give up while the dispatcher runs: an outage delays a
	// notification, it does not drop it.
	MinBackoff, MaxBackoff time.Duration
	// AttemptTimeout bounds each attempt of a destination without its own Timeout (default DefaultTimeout).
	AttemptTimeout time.Duration
	// ShutdownGrace is how long an attempt under way when Run's context ends may still take (default 5s, and never
	// more than the attempt's own deadline): the destination may already have acted on it (Slack posted the
	// message), and an answer never read would leave it undelivered, sent again after the restart.
	ShutdownGrace time.Duration
	Log           *slog.Logger
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
	// after waits between retries (time.After; a test records the waits instead of asserting elapsed time).
	after func(time.Duration) <-chan time.Time
}

type queue struct {
	dest Destination
	ch   chan incident.Event
}

var _ incident.Publisher = (*Dispatcher)(nil)

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
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultTimeout
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{o: o, after: time.After,
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncmedic_notifications_total",
			Help: "Notifications by notifier and result (sent, retried, failed, dropped; refreshed and refresh_failed for re-sends of what is still open).",
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
	d.queues = append(d.queues, &queue{dest: dest, ch: make(chan incident.Event, d.o.QueueSize)})
}

// Publish queues ev for every destination without blocking.
func (d *Dispatcher) Publish(ev incident.Event) {
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
	var refresh <-chan time.Time
	if q.dest.Refresher != nil {
		t := time.NewTicker(q.dest.Refresher.RefreshInterval())
		defer t.Stop()
		refresh = t.C
	}
	for {
		select {
		case <-ctx.Done():
			if n := len(q.ch); n > 0 {
				d.o.Log.Warn("shutting down with notifications not delivered", "notifier", q.dest.Name, "pending", n)
			}
			return
		case <-refresh:
			d.refresh(ctx, q.dest)
		case ev := <-q.ch:
			d.length.WithLabelValues(q.dest.Name).Set(float64(len(q.ch)))
			d.deliver(ctx, q.dest, ev, refresh)
		}
	}
}

// timeout is the destination's per-attempt deadline.
func (d *Dispatcher) timeout(dest Destination) time.Duration {
	if dest.Timeout > 0 {
		return dest.Timeout
	}
	return d.o.AttemptTimeout
}

// attempt calls the destination once under its per-attempt deadline. An attempt cut off by the deadline is retried
// whatever the notifier said, since the destination may simply be slow. When ctx ends during the attempt, it gets
// ShutdownGrace more to finish, so that what the destination did is known and recorded.
func (d *Dispatcher) attempt(ctx context.Context, dest Destination, ev incident.Event) (bool, error) {
	timeout := d.timeout(dest)
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(d.o.ShutdownGrace)
		defer t.Stop()
		select {
		case <-actx.Done():
		case <-t.C:
			cancel()
		}
	})
	defer stop()
	retry, err := dest.Notifier.Notify(actx, ev)
	if err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		return true, fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	return retry, err
}

// refresh re-sends what the destination still holds open, once, under the per-attempt deadline; it reports success.
func (d *Dispatcher) refresh(ctx context.Context, dest Destination) bool {
	rctx, cancel := context.WithTimeout(ctx, d.timeout(dest))
	defer cancel()
	if err := dest.Refresher.Refresh(rctx); err != nil {
		if ctx.Err() == nil {
			d.sent.WithLabelValues(dest.Name, "refresh_failed").Inc()
			d.o.Log.Warn("refresh failed; the next interval tries again", "notifier", dest.Name, "err", err)
		}
		return false
	}
	d.sent.WithLabelValues(dest.Name, "refreshed").Inc()
	return true
}

// deliver retries ev until it is delivered, refused for good, or ctx ends. Later events wait: order is kept. The
// destination's refresh keeps running while a retry waits.
func (d *Dispatcher) deliver(ctx context.Context, dest Destination, ev incident.Event, refresh <-chan time.Time) {
	log := d.o.Log.With("notifier", dest.Name, "incident", ev.Incident.ID, "event", ev.Kind, "rule", ev.Incident.Finding.Rule)
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(d.o.MinBackoff), backoff.WithMaxInterval(d.o.MaxBackoff),
		backoff.WithMultiplier(2), backoff.WithRandomizationFactor(0.2), backoff.WithMaxElapsedTime(0))
	for attempt := 1; ; attempt++ {
		retry, err := d.attempt(ctx, dest, ev)
		if err == nil {
			d.sent.WithLabelValues(dest.Name, "sent").Inc()
			return
		}
		if !retry || ctx.Err() != nil {
			d.sent.WithLabelValues(dest.Name, "failed").Inc()
			log.Error("notification failed", "err", fmt.Errorf("attempt %d: %w", attempt, err), "retry", false)
			return
		}
		wait, asked := RetryAfter(err)
		if !asked {
			wait = bo.NextBackOff()
		}
		d.sent.WithLabelValues(dest.Name, "retried").Inc()
		log.Warn("notification will be retried", "err", fmt.Errorf("attempt %d: %w", attempt, err), "wait", wait.String())
		if !d.wait(ctx, dest, wait, !asked, refresh) {
			d.sent.WithLabelValues(dest.Name, "failed").Inc()
			log.Warn("shutting down: notification not delivered", "attempts", attempt)
			return
		}
	}
}

// wait waits before a retry, refreshing the destination when its interval comes; a refresh that succeeds ends a
// backoff early (the destination answers again), never a wait the destination asked for. False when ctx ended.
func (d *Dispatcher) wait(ctx context.Context, dest Destination, wait time.Duration, cutShort bool, refresh <-chan time.Time) bool {
	done := d.after(wait)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-done:
			return true
		case <-refresh:
			if d.refresh(ctx, dest) && cutShort {
				return true
			}
		}
	}
}
