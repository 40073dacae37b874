package notify

import (
	"context"

	"github.com/syncmedic/syncmedic"
)

// Outbox is where the tracker records, per incident, the last transition each notifier delivered.
// *syncmedic.Tracker implements it (see Tracker.ResumeDelivery).
type Outbox interface {
	// Leading reports whether this replica leads; a replica that lost the lead leaves what it still had queued to
	// the new leader, which re-publishes it from the store.
	Leading() bool
	LastDelivered(incidentID, notifier string) int
	MarkDelivered(ctx context.Context, incidentID, notifier string, seq int)
}

var _ Outbox = (*syncmedic.Tracker)(nil)

// Durable wraps dest so that every numbered transition it delivers (or refuses for good) is recorded in outbox,
// and a transition it already delivered — re-published after a restart or a failover — is skipped, as is any
// numbered transition once this replica no longer leads. Unnumbered events (durable delivery off) pass through
// unchanged.
func Durable(dest Destination, outbox Outbox) Destination {
	return Destination{Name: dest.Name, Notifier: &durable{name: dest.Name, inner: dest.Notifier, outbox: outbox}}
}

type durable struct {
	name   string
	inner  Notifier
	outbox Outbox
}

func (d *durable) Notify(ctx context.Context, ev syncmedic.Event) (bool, error) {
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
