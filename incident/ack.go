package incident

import (
	"context"
	"fmt"
	"strings"
)

// Acknowledge records that by took incident id: the incident's Ack, persisted with it, and an EventAcknowledged
// transition (a thread reply "Acknowledged by …"). It is idempotent: the same person again changes nothing and
// announces nothing. Someone else is a takeover: their acknowledgement replaces the earlier one, names whom it took
// over from, and is announced. Only the leader records (ErrNotLeading elsewhere); a resolved incident cannot be
// acknowledged (ErrResolved). The caller checks the permission (policy.MayAcknowledge).
func (t *Tracker) Acknowledge(ctx context.Context, id, by string) error {
	by = strings.TrimSpace(by)
	if by == "" {
		return fmt.Errorf("%w: acknowledge: say who takes the incident", ErrInvalid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	inc := t.incidents[id]
	switch {
	case inc == nil:
		return fmt.Errorf("%w: no incident %s", ErrNotFound, id)
	case !t.o.Leader() || !t.synced:
		return ErrNotLeading
	case !inc.IsOpen():
		return fmt.Errorf("%w: incident %s resolved, there is nothing to acknowledge", ErrResolved, id)
	case inc.Ack != nil && inc.Ack.By == by:
		return nil
	}
	now := t.o.Now()
	prev := inc.Ack
	inc.Ack = &Ack{By: by, At: now}
	if prev != nil {
		inc.Ack.TakenOverFrom = prev.By
	}
	ev := t.event(EventAcknowledged, inc, nil, now)
	t.saveLocked(ctx)
	t.publishLocked([]Event{ev})
	t.changedLocked()
	t.o.Log.Info("incident acknowledged", "incident", id, "rule", inc.Finding.Rule, "who", by, "takenOverFrom", inc.Ack.TakenOverFrom)
	return nil
}
