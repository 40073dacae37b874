package incident

import (
	"context"
	"sort"
	"time"
)

// OutboxEntry is one transition of an incident, kept with the incident (and so in the Store) until every notifier
// has delivered it: a destination outage, a full queue or a restart delays the notification but never drops it, and
// a transition a notifier already delivered is not announced again.
type OutboxEntry struct {
	Seq     int       `json:"seq"`
	Kind    EventKind `json:"kind"`
	At      time.Time `json:"at"`
	Attempt *Attempt  `json:"attempt,omitempty"`
}

// maxOutbox bounds the undelivered transitions kept per incident; what does not fit is logged, never lost silently.
const maxOutbox = 100

// deliveryTimeout bounds the save that records a delivery (it must outlive a cancelled context at shutdown).
const deliveryTimeout = 10 * time.Second

func cloneOutbox(o []OutboxEntry, d map[string]int) ([]OutboxEntry, map[string]int) {
	var out []OutboxEntry
	if o != nil {
		out = make([]OutboxEntry, len(o))
		for i, e := range o {
			out[i] = e
			if e.Attempt != nil {
				a := *e.Attempt
				out[i].Attempt = &a
			}
		}
	}
	var dm map[string]int
	if d != nil {
		dm = make(map[string]int, len(d))
		for k, v := range d {
			dm[k] = v
		}
	}
	return out, dm
}

// eventSnapshot is the incident as notifiers see it: without the delivery bookkeeping.
func eventSnapshot(inc *Incident) Incident {
	c := inc.Clone()
	c.Outbox, c.Delivered = nil, nil
	return c
}

// ResumeDelivery makes notification delivery durable for the named notifiers (the dispatcher's destinations, each
// wrapped with notify.Durable): from now on every transition is numbered and kept in its incident's outbox until
// each notifier reports it delivered (MarkDelivered). It re-publishes, in order, what the store says is still
// undelivered, and does so again whenever this replica becomes leader. Call it once the destinations are attached
// to the publisher; with no notifier it does nothing.
func (t *Tracker) ResumeDelivery(_ context.Context, notifiers ...string) {
	if len(notifiers) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	names := append([]string(nil), notifiers...)
	sort.Strings(names)
	t.notifiers = names
	if t.o.Leader() && t.synced {
		t.redeliverLocked()
	}
}

// Leading reports whether this replica leads: only the leader notifies (and remediates).
func (t *Tracker) Leading() bool { return t.o.Leader() }

// LastDelivered returns the number of the last transition of incident id that notifier delivered (0: none).
func (t *Tracker) LastDelivered(id, notifier string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if inc := t.incidents[id]; inc != nil {
		return inc.Delivered[notifier]
	}
	return 0
}

// MarkDelivered records that notifier delivered transition seq of incident id (or refused it for good), drops the
// outbox entries every notifier has delivered, and persists that on the leader.
func (t *Tracker) MarkDelivered(ctx context.Context, id, notifier string, seq int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	inc := t.incidents[id]
	if inc == nil || inc.Delivered[notifier] >= seq {
		return
	}
	if inc.Delivered == nil {
		inc.Delivered = map[string]int{}
	}
	inc.Delivered[notifier] = seq
	low := seq
	for _, n := range t.notifiers {
		low = min(low, inc.Delivered[n])
	}
	keep := inc.Outbox[:0]
	for _, e := range inc.Outbox {
		if e.Seq > low {
			keep = append(keep, e)
		}
	}
	inc.Outbox = keep
	if t.o.Leader() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryTimeout)
		defer cancel()
		t.saveLocked(sctx)
	}
}

// enqueueLocked numbers ev and keeps it in inc's outbox, when delivery is durable and this replica leads.
func (t *Tracker) enqueueLocked(inc *Incident, ev *Event) {
	if t.notifiers == nil || !t.o.Leader() {
		return
	}
	inc.Seq++
	ev.Seq = inc.Seq
	e := OutboxEntry{Seq: ev.Seq, Kind: ev.Kind, At: ev.At}
	if ev.Attempt != nil {
		a := *ev.Attempt
		e.Attempt = &a
	}
	inc.Outbox = append(inc.Outbox, e)
	if n := len(inc.Outbox) - maxOutbox; n > 0 {
		for _, lost := range inc.Outbox[:n] {
			t.o.Log.Error("incident outbox full: an undelivered notification is given up", "incident", inc.ID,
				"event", lost.Kind, "seq", lost.Seq, "rule", inc.Finding.Rule, "kept", maxOutbox)
		}
		inc.Outbox = append([]OutboxEntry(nil), inc.Outbox[n:]...)
	}
}

// publishSyncedLocked publishes what a merge with the store produced: with durable delivery, every undelivered
// transition in order (the new events are among them); otherwise only the new events.
func (t *Tracker) publishSyncedLocked(events []Event) {
	if t.notifiers != nil {
		t.redeliverLocked()
		return
	}
	t.publishLocked(events)
}

// redeliverLocked re-publishes every outbox entry, incidents in the order they opened and each incident's
// transitions in order. Notifiers skip what they already delivered (notify.Durable).
func (t *Tracker) redeliverLocked() {
	incs := make([]*Incident, 0, len(t.incidents))
	for _, inc := range t.incidents {
		if len(inc.Outbox) > 0 {
			incs = append(incs, inc)
		}
	}
	sort.Slice(incs, func(i, j int) bool {
		if !incs[i].OpenedAt.Equal(incs[j].OpenedAt) {
			return incs[i].OpenedAt.Before(incs[j].OpenedAt)
		}
		return incs[i].ID < incs[j].ID
	})
	n := 0
	for _, inc := range incs {
		snap := eventSnapshot(inc)
		for _, e := range inc.Outbox {
			ev := Event{Kind: e.Kind, At: e.At, Incident: snap, Seq: e.Seq}
			if e.Attempt != nil {
				a := *e.Attempt
				ev.Attempt = &a
			}
			t.o.Publisher.Publish(ev)
			n++
		}
	}
	if n > 0 {
		t.o.Log.Info("re-publishing notifications not yet delivered", "transitions", n, "incidents", len(incs))
	}
}
