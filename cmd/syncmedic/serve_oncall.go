package main

import (
	"context"
	"time"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/silence"
	"github.com/syncmedic/syncmedic/ui"
)

// onCall is the tracker's on-call verbs (acknowledge, silences) for the components, which start before the
// tracker exists: until it does, changes answer incident.ErrNotLeading (retry) and lists are empty.
type onCall struct {
	tracker func() *incident.Tracker
}

var _ ui.SilenceAPI = onCall{}

// Acknowledge records that by took incident id (incident.Tracker.Acknowledge).
func (o onCall) Acknowledge(ctx context.Context, id, by string) error {
	if t := o.tracker(); t != nil {
		return t.Acknowledge(ctx, id, by)
	}
	return incident.ErrNotLeading
}

// Silence silences incident id for d (incident.Tracker.Silence).
func (o onCall) Silence(ctx context.Context, id, by string, d time.Duration, comment string) error {
	if t := o.tracker(); t != nil {
		return t.Silence(ctx, id, by, d, comment)
	}
	return incident.ErrNotLeading
}

// Silences lists the silences (incident.Tracker.Silences).
func (o onCall) Silences() []silence.Silence {
	if t := o.tracker(); t != nil {
		return t.Silences()
	}
	return nil
}

// GetSilence returns one silence (incident.Tracker.GetSilence).
func (o onCall) GetSilence(id string) (silence.Silence, bool) {
	if t := o.tracker(); t != nil {
		return t.GetSilence(id)
	}
	return silence.Silence{}, false
}

// CreateSilence creates a silence (incident.Tracker.CreateSilence).
func (o onCall) CreateSilence(ctx context.Context, s silence.Silence) (silence.Silence, error) {
	if t := o.tracker(); t != nil {
		return t.CreateSilence(ctx, s)
	}
	return silence.Silence{}, incident.ErrNotLeading
}

// ExpireSilence expires a silence (incident.Tracker.ExpireSilence).
func (o onCall) ExpireSilence(ctx context.Context, id string) error {
	if t := o.tracker(); t != nil {
		return t.ExpireSilence(ctx, id)
	}
	return incident.ErrNotLeading
}

// Now is the tracker's clock (the system clock before it exists).
func (o onCall) Now() time.Time {
	if t := o.tracker(); t != nil {
		return t.Now()
	}
	return time.Now()
}
