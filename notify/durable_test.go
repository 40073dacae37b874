package notify

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic/incident"
)

// memOutbox records deliveries like the tracker does (a fake for this unit test of the wrapper's logic).
type memOutbox struct {
	mu       sync.Mutex
	last     map[string]int
	follower bool
}

func (o *memOutbox) Leading() bool { return !o.follower }

func (o *memOutbox) LastDelivered(id, notifier string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last[id+"/"+notifier]
}

func (o *memOutbox) MarkDelivered(_ context.Context, id, notifier string, seq int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		o.last = map[string]int{}
	}
	o.last[id+"/"+notifier] = max(o.last[id+"/"+notifier], seq)
}

func TestDurableDestination(t *testing.T) {
	ctx := context.Background()
	numbered := func(seq int, kind incident.EventKind) incident.Event {
		e := ev("a", kind)
		e.Seq = seq
		return e
	}
	for _, tc := range []struct {
		name      string
		script    []error
		events    []incident.Event
		delivered []string
		last      int
		follower  bool
	}{
		{name: "a delivered transition is recorded and a replay of it is skipped",
			events:    []incident.Event{numbered(1, incident.EventOpened), numbered(1, incident.EventOpened), numbered(2, incident.EventResolved)},
			delivered: []string{"a:opened", "a:resolved"}, last: 2},
		{name: "a failure worth retrying is not recorded as delivered",
			script: []error{errors.New("retry")}, events: []incident.Event{numbered(1, incident.EventOpened)}, last: 0},
		{name: "a refusal for good is recorded, so it is not replayed after every restart",
			script: []error{errors.New("channel_not_found")}, events: []incident.Event{numbered(1, incident.EventOpened)}, last: 1},
		{name: "a replica that lost the lead leaves its queued transitions to the new leader",
			follower: true, events: []incident.Event{numbered(1, incident.EventOpened)}, last: 0},
		{name: "unnumbered events pass through and record nothing",
			events: []incident.Event{ev("a", incident.EventOpened), ev("a", incident.EventOpened)}, delivered: []string{"a:opened", "a:opened"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, box := &recorder{script: tc.script}, &memOutbox{follower: tc.follower}
			d := Durable(Destination{Name: "slack", Notifier: rec}, box)
			require.Equal(t, "slack", d.Name)
			for _, e := range tc.events {
				_, _ = d.Notifier.Notify(ctx, e)
			}
			require.Equal(t, tc.delivered, rec.got())
			require.Equal(t, tc.last, box.LastDelivered("a", "slack"))
		})
	}
}
