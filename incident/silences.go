package incident

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/silence"
)

// SilenceStore is implemented by the stores that also keep silences (every store of this package): the tracker
// keeps its silences with its incidents, so they survive restarts and reach the next leader. With a store that does
// not implement it, silences live in memory only.
type SilenceStore interface {
	// LoadSilences returns every stored silence; an empty store returns nothing and no error.
	LoadSilences(ctx context.Context) ([]silence.Silence, error)
	// SaveSilences replaces the stored silences.
	SaveSilences(ctx context.Context, silences []silence.Silence) error
}

// maxSilences bounds the silences kept, maxSilencesBytes the room their stored form may take (a ConfigMap holds at
// most 1 MiB, and the silences have one of their own); expired ones go first.
const (
	maxSilences      = 500
	maxSilencesBytes = 768 << 10
)

// silenceCheckInterval is how often Run looks for silences that started or ended; followerReloadInterval how often
// a follower reads the leader's silences from the store again.
const (
	silenceCheckInterval   = time.Second
	followerReloadInterval = 10 * time.Second
)

// withheld reports whether a silence keeps the transition kind of inc from the notifiers. An incident never
// announced stays silent until it is (its resolution included); a silenced, announced incident's thread still hears
// its acknowledgement, its resolution and fixes a person asked for, but no update and no automatic attempt.
func withheld(inc *Incident, kind EventKind, a *Attempt) bool {
	if kind == EventOpened {
		return inc.SilencedBy != ""
	}
	if inc.Unannounced {
		return true
	}
	if inc.SilencedBy == "" {
		return false
	}
	switch kind {
	case EventResolved, EventAcknowledged:
		return false
	case EventRemediating, EventRemediated:
		return a == nil || a.RequestedBy == ""
	}
	return true
}

// Silenced reports whether an active silence mutes the incident: the remediation stage applies no automatic remedy
// to it.
func (i *Incident) Silenced() bool { return i.SilencedBy != "" }

// Silences returns a copy of every silence the tracker keeps (expired ones for the retention), active first.
func (t *Tracker) Silences() []silence.Silence {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]silence.Silence, 0, len(t.silences))
	for _, s := range t.silences {
		out = append(out, s.Clone())
	}
	silence.Sort(out, t.o.Now())
	return out
}

// GetSilence returns a copy of one silence.
func (t *Tracker) GetSilence(id string) (silence.Silence, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.silences[id]
	if s == nil {
		return silence.Silence{}, false
	}
	return s.Clone(), true
}

// Silence silences incident id for d: a silence by by with exact matchers on its rule, namespace, app and object
// name (silence.ForFinding) from now on. It is SilenceIncident without the silence.
func (t *Tracker) Silence(ctx context.Context, id, by string, d time.Duration, comment string) error {
	_, err := t.SilenceIncident(ctx, id, by, d, comment)
	return err
}

// SilenceIncident silences incident id for d (see Silence) and returns the silence created.
func (t *Tracker) SilenceIncident(ctx context.Context, id, by string, d time.Duration, comment string) (silence.Silence, error) {
	inc, ok := t.Get(id)
	if !ok {
		return silence.Silence{}, fmt.Errorf("%w: no incident %s", ErrNotFound, id)
	}
	if d <= 0 {
		return silence.Silence{}, fmt.Errorf("%w: duration: want a positive duration such as 2h", ErrInvalid)
	}
	now := t.o.Now()
	return t.CreateSilence(ctx, silence.Silence{Matchers: silence.ForFinding(inc.Finding), StartsAt: now, EndsAt: now.Add(d),
		CreatedBy: by, Comment: comment})
}

// CreateSilence validates s, gives it a new ID, keeps and persists it, and applies it at once to the open
// incidents. A StartsAt in the past (or unset) is now. Only the leader creates (ErrNotLeading elsewhere).
func (t *Tracker) CreateSilence(ctx context.Context, s silence.Silence) (silence.Silence, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.o.Now()
	s = s.Clone()
	s.CreatedBy, s.Comment = strings.TrimSpace(s.CreatedBy), strings.TrimSpace(s.Comment)
	if s.StartsAt.IsZero() || s.StartsAt.Before(now) {
		s.StartsAt = now
	}
	if err := s.Validate(); err != nil {
		return silence.Silence{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if d := s.EndsAt.Sub(s.StartsAt); d > t.o.SilenceMaxDuration {
		return silence.Silence{}, fmt.Errorf("%w: the silence lasts %s, at most %s (serve --silence-max-duration): silence for less, and again when it ends if needed",
			ErrInvalid, silence.FormatDuration(d), silence.FormatDuration(t.o.SilenceMaxDuration))
	}
	if !t.o.Leader() || !t.synced {
		return silence.Silence{}, ErrNotLeading
	}
	t.gcSilencesLocked(now)
	if len(t.silences) >= maxSilences {
		return silence.Silence{}, fmt.Errorf("%w: there are %d silences already, at most %d: expire some", ErrLimited, len(t.silences), maxSilences)
	}
	if n := t.liveSilencesOfLocked(s.CreatedBy, now); n >= silence.MaxPerCreator {
		return silence.Silence{}, fmt.Errorf("%w: %s has %d pending or active silences, at most %d: expire some first", ErrLimited, s.CreatedBy, n, silence.MaxPerCreator)
	}
	s.ID, s.UpdatedAt = silence.NewID(), now
	t.silences[s.ID] = &s
	if err := t.fitSilencesLocked(now); err != nil {
		delete(t.silences, s.ID)
		return silence.Silence{}, err
	}
	if err := t.saveSilencesLocked(ctx); err != nil {
		delete(t.silences, s.ID)
		return silence.Silence{}, err
	}
	t.o.Log.Info("silence created", "silence", s.ID, "who", s.CreatedBy, "matchers", matchersString(s.Matchers),
		"startsAt", s.StartsAt, "endsAt", s.EndsAt, "comment", s.Comment)
	t.applySilencesLocked(ctx, now)
	return s.Clone(), nil
}

// ExpireSilence ends silence id now (a pending one never starts); the open incidents it held back are announced.
// Expiring an expired silence changes nothing. Only the leader expires (ErrNotLeading elsewhere).
func (t *Tracker) ExpireSilence(ctx context.Context, id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.silences[id]
	if s == nil {
		return fmt.Errorf("%w: no silence %s", ErrNotFound, id)
	}
	if !t.o.Leader() || !t.synced {
		return ErrNotLeading
	}
	now := t.o.Now()
	if s.State(now) == silence.StateExpired {
		return nil
	}
	prev := *s
	if s.StartsAt.After(now) {
		s.StartsAt = now
	}
	s.EndsAt, s.UpdatedAt = now, now
	if err := t.saveSilencesLocked(ctx); err != nil {
		*s = prev
		return err
	}
	t.o.Log.Info("silence expired", "silence", id, "matchers", matchersString(s.Matchers))
	t.applySilencesLocked(ctx, now)
	return nil
}

// Run notices, with the tracker's clock, silences that start or end while no evaluation comes: an open incident
// whose silence ended is announced then. On a follower it reloads the silences the leader stored, so every replica
// shows them. It returns when ctx ends.
func (t *Tracker) Run(ctx context.Context) {
	interval := t.o.SilenceCheckInterval
	if interval <= 0 {
		interval = silenceCheckInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.checkSilences(ctx)
		}
	}
}

// checkSilences is one pass of Run.
func (t *Tracker) checkSilences(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.o.Now()
	if !t.o.Leader() && now.Sub(t.silencesReloaded) >= followerReloadInterval {
		t.reloadSilencesLocked(ctx)
		t.silencesReloaded = now
	}
	t.applySilencesLocked(ctx, now)
}

// reloadSilencesLocked replaces the silences in memory with the stored ones (a follower's view of the leader's).
func (t *Tracker) reloadSilencesLocked(ctx context.Context) {
	ss, ok := t.o.Store.(SilenceStore)
	if !ok {
		return
	}
	stored, err := ss.LoadSilences(ctx)
	if err != nil {
		t.o.Log.Debug("cannot reload the stored silences; the next check retries", "err", err)
		return
	}
	t.setSilencesLocked(stored)
}

// setSilencesLocked replaces the silences in memory, dropping those that are not valid.
func (t *Tracker) setSilencesLocked(stored []silence.Silence) {
	m := make(map[string]*silence.Silence, len(stored))
	for i := range stored {
		s := stored[i].Clone()
		if err := s.Validate(); err != nil || s.ID == "" {
			t.o.Log.Error("ignoring a stored silence that is not valid", "silence", s.ID, "err", err)
			continue
		}
		m[s.ID] = &s
	}
	t.silences = m
}

// applySilencesLocked marks each open incident with the active silence that mutes it, announces those a silence
// held back that no silence mutes any more, and on the leader saves and publishes what changed.
func (t *Tracker) applySilencesLocked(ctx context.Context, now time.Time) {
	var events []Event
	dirty := false
	for _, id := range t.openByAgeLocked() {
		ev, changed := t.refreshSilenceLocked(t.incidents[id], now)
		dirty = dirty || changed
		if ev != nil {
			events = append(events, *ev)
		}
	}
	t.o.Metrics.setSilences(t.silences, now)
	if !dirty {
		return
	}
	if t.o.Leader() && t.synced {
		t.saveLocked(ctx)
		t.publishLocked(events)
	}
	t.changedLocked()
}

// openByAgeLocked returns the IDs of the open incidents in the order they opened.
func (t *Tracker) openByAgeLocked() []string {
	ids := make([]string, 0, len(t.open))
	for _, id := range t.open {
		if t.incidents[id] != nil {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := t.incidents[ids[i]], t.incidents[ids[j]]
		if !a.OpenedAt.Equal(b.OpenedAt) {
			return a.OpenedAt.Before(b.OpenedAt)
		}
		return a.ID < b.ID
	})
	return ids
}

// refreshSilenceLocked sets inc.SilencedBy for now. When no silence mutes an open incident whose announcement a
// silence held back, it announces it now and returns that event. changed says whether inc changed.
func (t *Tracker) refreshSilenceLocked(inc *Incident, now time.Time) (*Event, bool) {
	id := ""
	if inc.IsOpen() {
		id = t.silencedByLocked(inc, now)
	}
	changed := id != inc.SilencedBy
	if changed {
		if id != "" {
			t.o.Log.Info("incident silenced", "incident", inc.ID, "rule", inc.Finding.Rule, "silence", id)
		} else if inc.SilencedBy != "" {
			t.o.Log.Info("incident no longer silenced", "incident", inc.ID, "rule", inc.Finding.Rule, "silence", inc.SilencedBy)
		}
	}
	inc.SilencedBy = id
	if id != "" || !inc.Unannounced || !inc.IsOpen() {
		return nil, changed
	}
	inc.Unannounced = false
	t.o.Log.Info("incident announced: no silence mutes it any more", "incident", inc.ID, "rule", inc.Finding.Rule, "subject", inc.Subject)
	ev := t.event(EventOpened, inc, nil, now)
	return &ev, true
}

// silencedByLocked returns the ID of the active silence that mutes inc (the one that ends last), or "".
func (t *Tracker) silencedByLocked(inc *Incident, now time.Time) string {
	if len(t.silences) == 0 {
		return ""
	}
	l := silence.LabelsOf(inc.Finding)
	var best *silence.Silence
	for _, s := range t.silences {
		if s.State(now) != silence.StateActive || !s.Matches(l) {
			continue
		}
		if best == nil || s.EndsAt.After(best.EndsAt) || (s.EndsAt.Equal(best.EndsAt) && s.ID < best.ID) {
			best = s
		}
	}
	if best == nil {
		return ""
	}
	return best.ID
}

// gcSilencesLocked forgets silences expired for longer than the retention, and the oldest expired beyond
// maxSilences.
func (t *Tracker) gcSilencesLocked(now time.Time) {
	var expired []*silence.Silence
	for id, s := range t.silences {
		if s.State(now) != silence.StateExpired {
			continue
		}
		if now.Sub(s.EndsAt) > t.o.Retention {
			delete(t.silences, id)
			continue
		}
		expired = append(expired, s)
	}
	if n := len(t.silences) - maxSilences + 1; n > 0 {
		sort.Slice(expired, func(i, j int) bool { return expired[i].EndsAt.Before(expired[j].EndsAt) })
		for _, s := range expired[:min(n, len(expired))] {
			delete(t.silences, s.ID)
		}
	}
}

// liveSilencesOfLocked counts the pending and active silences createdBy made.
func (t *Tracker) liveSilencesOfLocked(createdBy string, now time.Time) int {
	n := 0
	for _, s := range t.silences {
		if s.CreatedBy == createdBy && s.State(now) != silence.StateExpired {
			n++
		}
	}
	return n
}

// fitSilencesLocked makes the silences fit in maxSilencesBytes once stored: it forgets expired ones, the oldest first,
// and when the pending and active ones alone are too large it says so (ErrLimited).
func (t *Tracker) fitSilencesLocked(now time.Time) error {
	size := func() int {
		b, _ := encodeSilences(t.sortedSilencesLocked())
		return len(b)
	}
	n := size()
	if n <= maxSilencesBytes {
		return nil
	}
	var expired []*silence.Silence
	for _, s := range t.silences {
		if s.State(now) == silence.StateExpired {
			expired = append(expired, s)
		}
	}
	sort.Slice(expired, func(i, j int) bool { return expired[i].EndsAt.Before(expired[j].EndsAt) })
	for _, s := range expired {
		delete(t.silences, s.ID)
		if n = size(); n <= maxSilencesBytes {
			return nil
		}
	}
	return fmt.Errorf("%w: the silences would take %d KiB, at most %d KiB: expire some, or write shorter comments and fewer matchers",
		ErrLimited, (n+1023)>>10, maxSilencesBytes>>10)
}

// sortedSilencesLocked returns copies of the silences by ID, as they are stored.
func (t *Tracker) sortedSilencesLocked() []silence.Silence {
	all := make([]silence.Silence, 0, len(t.silences))
	for _, id := range sortedKeys(t.silences) {
		all = append(all, t.silences[id].Clone())
	}
	return all
}

// saveSilencesLocked persists the silences (when the store keeps them).
func (t *Tracker) saveSilencesLocked(ctx context.Context) error {
	ss, ok := t.o.Store.(SilenceStore)
	if !ok {
		return nil
	}
	if err := ss.SaveSilences(ctx, t.sortedSilencesLocked()); err != nil {
		t.o.Log.Error("cannot save silences", "err", err)
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// loadSilencesLocked reads the stored silences (when the store keeps them).
func (t *Tracker) loadSilencesLocked(ctx context.Context) error {
	ss, ok := t.o.Store.(SilenceStore)
	if !ok {
		return nil
	}
	stored, err := ss.LoadSilences(ctx)
	if err != nil {
		return fmt.Errorf("load silences: %w", err)
	}
	t.setSilencesLocked(stored)
	return nil
}

// publishLocked hands events to the publisher, except those a silence withholds (counted in
// syncmedic_notifications_suppressed_total).
func (t *Tracker) publishLocked(events []Event) {
	for _, ev := range events {
		if ev.withheld {
			t.o.Metrics.suppressed(ev.Kind)
			t.o.Log.Debug("notification withheld by a silence", "incident", ev.Incident.ID, "event", ev.Kind, "silence", ev.Incident.SilencedBy)
			continue
		}
		t.o.Publisher.Publish(ev)
	}
}

func matchersString(ms []silence.Matcher) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// silencesPath is where a FileStore keeps its silences: next to the incidents.
func silencesPath(incidents string) string { return incidents + ".silences" }
