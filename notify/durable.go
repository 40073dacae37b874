package notify

import (
	"context"

	"github.com/syncmedic/syncmedic/incident"
)

// Outbox is where the tracker records, per incident, the last transition each notifier delivered.
// *incident.Tracker implements it (see Tracker.ResumeDelivery).
type Outbox interface {
	// Leading reports whether this replica leads; a replica that lost the lead leaves what it still had queued to
	// the new leader, which re-publishes it from the store.
	Leading() bool
	LastDelivered(incidentID, notifier string) int
	MarkDelivered(ctx context.Context, incidentID, notifier string, seq int)
}

var _ Outbox = (*incident.Tracker)(nil)

// Durable wraps dest so that it gets only the incidents the policy routes to its name (policy.Routing), and every
// numbered transition it delivers (or refuses for good) is recorded in outbox,
// and a transition it already delivered — re-published after a restart or a failover — is skipped, as is any
// numbered transition once this replica no longer leads. Unnumbered events (durable delivery off) pass through
// unchanged. The destination's Timeout and Refresher are kept.
func Durable(dest Destination, outbox Outbox) Destination {
	wrapped := dest
	wrapped.Notifier = &durable{name: dest.Name, inner: dest.Notifier, outbox: outbox}
	return wrapped
}

type durable struct {
	name   string
	inner  Notifier
	outbox Outbox
}

func (d *durable) Notify(ctx context.Context, ev incident.Event) (bool, error) {
	if !ev.Incident.Route.Allows(d.name) {
		// The policy routes this incident elsewhere: nothing to send, and nothing left to deliver here.
		if ev.Seq != 0 && d.outbox.Leading() && ev.Seq > d.outbox.LastDelivered(ev.Incident.ID, d.name) {
			d.outbox.MarkDelivered(ctx, ev.Incident.ID, d.name, ev.Seq)
		}
		return false, nil
	}
	if ev.Seq == 0 {
		return d.inner.Notify(ctx, ev)
	}
	if !d.outbox.Leading() || ev.Seq <= d.outbox.LastDelivered(ev.Incident.ID, d.name) {
		return false, nil
	}
	retry, err := d.inner.Notify(ctx, ev)
	if err == nil || (!retry && ctx.Err() == nil) {
		d.outbox.MarkDelivered(ctx, ev.Incident.ID, d.name, ev.Seq)
	}
	return retry, err
}
