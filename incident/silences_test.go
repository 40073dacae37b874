package incident

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/silence"
)

// submissions records what the tracker hands to the remediation stage.
type submissions struct {
	mu  sync.Mutex
	ids []string
}

func (s *submissions) Submit(_ context.Context, _ Ledger, id string) {
	s.mu.Lock()
	s.ids = append(s.ids, id)
	s.mu.Unlock()
}

func (s *submissions) Seed([]Incident) {}

func (s *submissions) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

func autoPolicy(t *testing.T) func() *policy.Policy {
	t.Helper()
	p, err := policy.LoadPolicy([]byte("rules:\n  argocd/hook-finalizer-stuck:\n    mode: auto\n"))
	require.NoError(t, err)
	return func() *policy.Policy { return p }
}

func shopSilence(c interface{ Now() time.Time }, d time.Duration) silence.Silence {
	return silence.Silence{Matchers: []silence.Matcher{{Name: "rule", Value: "argocd/hook-finalizer-stuck"}, {Name: "name", Value: "migr.*", IsRegex: true}},
		EndsAt: c.Now().Add(d), CreatedBy: "alice", Comment: "maintenance of the shop"}
}

func TestSilenceSuppressesAnnouncementAndAutoRemedy(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	evs := &events{}
	rem := &submissions{}
	reg := prometheus.NewRegistry()
	tr := newTestTracker(t, TrackerOptions{Now: c.Now, Publisher: evs, Remediation: rem, Policy: autoPolicy(t), Metrics: NewMetrics(reg)})
	s, err := tr.CreateSilence(ctx, shopSilence(c, time.Hour))
	require.NoError(t, err)
	require.NotEmpty(t, s.ID)

	matching, other := hookFinding("shop", "migrate"), hookFinding("shop", "seed")
	tr.Observe(ctx, "s", []syncmedic.Finding{matching, other})

	incs := tr.Incidents()
	require.Len(t, incs, 2, "a silenced incident is still tracked")
	byName := map[string]Incident{}
	for _, inc := range incs {
		byName[inc.Finding.Object.Name] = inc
	}
	require.Equal(t, s.ID, byName["migrate"].SilencedBy)
	require.True(t, byName["migrate"].Unannounced)
	require.Empty(t, byName["seed"].SilencedBy)
	require.Equal(t, []EventKind{EventOpened}, evs.kinds(), "only the incident no silence matches is announced")
	require.Equal(t, byName["seed"].ID, evs.last().Incident.ID)
	require.Equal(t, []string{byName["seed"].ID}, rem.list(), "the silenced incident is not handed to the remediation stage")
	require.Equal(t, []string{`syncmedic_notifications_suppressed_total{event="opened"} 1`, `syncmedic_notifications_suppressed_total{event="remediated"} 0`,
		`syncmedic_notifications_suppressed_total{event="remediating"} 0`, `syncmedic_notifications_suppressed_total{event="resolved"} 0`,
		`syncmedic_notifications_suppressed_total{event="updated"} 0`}, seriesOf(t, reg, "syncmedic_notifications_suppressed_total"))
	require.Equal(t, []string{`syncmedic_silences{state="active"} 1`, `syncmedic_silences{state="expired"} 0`, `syncmedic_silences{state="pending"} 0`},
		seriesOf(t, reg, "syncmedic_silences"))

	t.Run("later evaluations neither announce nor remedy it", func(t *testing.T) {
		g := matching
		g.Summary = "hook Job migrate is still stuck terminating"
		c.Advance(time.Minute)
		tr.Observe(ctx, "s", []syncmedic.Finding{g, other})
		require.Equal(t, []EventKind{EventOpened}, evs.kinds())
		require.Equal(t, []string{byName["seed"].ID, byName["seed"].ID}, rem.list())
	})
}

func TestSilenceExpiryAnnouncesStillOpenIncidents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newClock()
	evs := &events{}
	rem := &submissions{}
	reg := prometheus.NewRegistry()
	tr := newTestTracker(t, TrackerOptions{Now: c.Now, Publisher: evs, Remediation: rem, Policy: autoPolicy(t),
		Metrics: NewMetrics(reg), SilenceCheckInterval: 5 * time.Millisecond})
	_, err := tr.CreateSilence(ctx, shopSilence(c, time.Hour))
	require.NoError(t, err)
	tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	require.Empty(t, evs.kinds())
	id := tr.Incidents()[0].ID

	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	t.Run("nothing happens before the silence ends", func(t *testing.T) {
		c.Advance(59 * time.Minute)
		time.Sleep(50 * time.Millisecond) // ten checks of Run
		require.Empty(t, evs.kinds())
	})
	t.Run("the tracker notices the end on its own and announces the open incident", func(t *testing.T) {
		c.Advance(time.Minute)
		require.Eventually(t, func() bool { return len(evs.kinds()) == 1 }, 5*time.Second, 5*time.Millisecond)
		require.Equal(t, EventOpened, evs.last().Kind)
		require.Equal(t, id, evs.last().Incident.ID)
		inc, _ := tr.Get(id)
		require.Empty(t, inc.SilencedBy)
		require.False(t, inc.Unannounced)
		require.Contains(t, seriesOf(t, reg, "syncmedic_silences"), `syncmedic_silences{state="expired"} 1`)
	})
	t.Run("the next evaluation remedies it", func(t *testing.T) {
		tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
		require.Equal(t, []string{id}, rem.list())
		require.Equal(t, []EventKind{EventOpened}, evs.kinds(), "announced once")
	})
	cancel()
	<-done
}

func TestExpiringASilenceAnnouncesAtOnce(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	evs := &events{}
	tr := newTestTracker(t, TrackerOptions{Now: c.Now, Publisher: evs})
	s, err := tr.CreateSilence(ctx, shopSilence(c, time.Hour))
	require.NoError(t, err)
	tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	require.Empty(t, evs.kinds())
	require.NoError(t, tr.ExpireSilence(ctx, s.ID))
	require.Equal(t, []EventKind{EventOpened}, evs.kinds())
	require.NoError(t, tr.ExpireSilence(ctx, s.ID), "expiring twice changes nothing")
	require.Len(t, evs.kinds(), 1)
	got, ok := tr.GetSilence(s.ID)
	require.True(t, ok)
	require.Equal(t, silence.StateExpired, got.State(c.Now()))
	require.ErrorIs(t, tr.ExpireSilence(ctx, "nope"), ErrNotFound)
}

func TestSilencedIncidentThatResolvesIsNeverAnnounced(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	evs := &events{}
	tr := newTestTracker(t, TrackerOptions{Now: c.Now, Publisher: evs})
	s, err := tr.CreateSilence(ctx, shopSilence(c, time.Hour))
	require.NoError(t, err)
	tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	for range 3 {
		tr.Observe(ctx, "s", nil)
	}
	require.Equal(t, StateResolved, tr.Incidents()[0].State)
	require.NoError(t, tr.ExpireSilence(ctx, s.ID))
	require.Empty(t, evs.kinds(), "neither its opening nor its resolution reached a notifier")
}

func TestSilenceOfAnAnnouncedIncidentWithholdsUpdatesNotResolution(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	evs := &events{}
	tr := newTestTracker(t, TrackerOptions{Now: c.Now, Publisher: evs})
	f := hookFinding("shop", "migrate")
	tr.Observe(ctx, "s", []syncmedic.Finding{f})
	id := tr.Incidents()[0].ID
	require.NoError(t, tr.Silence(ctx, id, "bob", time.Hour, "known, fixing it by hand"))
	inc, _ := tr.Get(id)
	require.NotEmpty(t, inc.SilencedBy)
	g := f
	g.Summary = "changed"
	tr.Observe(ctx, "s", []syncmedic.Finding{g})
	require.Equal(t, []EventKind{EventOpened}, evs.kinds(), "the update is withheld")
	for range 3 {
		tr.Observe(ctx, "s", nil)
	}
	require.Equal(t, []EventKind{EventOpened, EventResolved}, evs.kinds(), "the thread it has is closed")
}

func TestSilencesAndAcksSurviveRestart(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	store := &FileStore{Path: filepath.Join(t.TempDir(), "state.json")}
	tr := newTestTracker(t, TrackerOptions{Store: store, Now: c.Now})
	f := hookFinding("shop", "migrate")
	s, err := tr.CreateSilence(ctx, shopSilence(c, time.Hour))
	require.NoError(t, err)
	tr.Observe(ctx, "s", []syncmedic.Finding{f})
	id := tr.Incidents()[0].ID
	require.NoError(t, tr.Acknowledge(ctx, id, "alice"))

	evs := &events{}
	restarted := newTestTracker(t, TrackerOptions{Store: store, Now: c.Now, Publisher: evs})
	got, ok := restarted.GetSilence(s.ID)
	require.True(t, ok, "the silence survives the restart")
	require.Equal(t, s.Matchers[1].String(), got.Matchers[1].String())
	inc, _ := restarted.Get(id)
	require.Equal(t, "alice", inc.Ack.By)
	require.Equal(t, s.ID, inc.SilencedBy)
	restarted.Observe(ctx, "s", []syncmedic.Finding{f})
	require.Empty(t, evs.kinds(), "still silenced after the restart")

	t.Run("a silence that ended while syncmedic was down announces on the next start", func(t *testing.T) {
		c.Advance(2 * time.Hour)
		evs := &events{}
		again := newTestTracker(t, TrackerOptions{Store: store, Now: c.Now, Publisher: evs})
		require.Equal(t, []EventKind{EventOpened}, evs.kinds())
		require.Equal(t, id, evs.last().Incident.ID)
		require.Equal(t, "alice", evs.last().Incident.Ack.By)
		_ = again
	})
}

func TestSilenceValidationAndLeadership(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	leading := true
	tr := newTestTracker(t, TrackerOptions{Now: c.Now, Leader: func() bool { return leading }})
	bad := shopSilence(c, time.Hour)
	bad.Matchers = []silence.Matcher{{Name: "pod", Value: "x"}}
	_, err := tr.CreateSilence(ctx, bad)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `matcher name "pod"`)
	bad = shopSilence(c, time.Hour)
	bad.Matchers[0] = silence.Matcher{Name: "rule", Value: "(", IsRegex: true}
	_, err = tr.CreateSilence(ctx, bad)
	require.ErrorContains(t, err, "not a regular expression")

	leading = false
	_, err = tr.CreateSilence(ctx, shopSilence(c, time.Hour))
	require.ErrorIs(t, err, ErrNotLeading)
	require.Empty(t, tr.Silences())
}

func TestFollowerReloadsTheLeadersSilences(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	store := &MemoryStore{}
	leader := newTestTracker(t, TrackerOptions{Store: store, Now: c.Now})
	follower := newTestTracker(t, TrackerOptions{Store: store, Now: c.Now, Leader: func() bool { return false }})
	s, err := leader.CreateSilence(ctx, shopSilence(c, time.Hour))
	require.NoError(t, err)
	follower.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	follower.checkSilences(ctx)
	require.Len(t, follower.Silences(), 1)
	require.Equal(t, s.ID, follower.Incidents()[0].SilencedBy, "a follower shows the incident silenced too")
}

// A silence longer than SilenceMaxDuration (default a week) is refused, naming the maximum; one that long is not.
func TestSilenceLongerThanTheMaximumIsRefused(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	tr := newTestTracker(t, TrackerOptions{Now: c.Now})
	_, err := tr.CreateSilence(ctx, shopSilence(c, 8*24*time.Hour))
	require.ErrorIs(t, err, ErrInvalid)
	require.EqualError(t, err, "invalid: the silence lasts 8d, at most 7d (serve --silence-max-duration): silence for less, and again when it ends if needed")
	require.Empty(t, tr.Silences())
	_, err = tr.CreateSilence(ctx, shopSilence(c, 7*24*time.Hour))
	require.NoError(t, err)

	short := newTestTracker(t, TrackerOptions{Now: c.Now, SilenceMaxDuration: 4 * time.Hour})
	_, err = short.CreateSilence(ctx, shopSilence(c, 5*time.Hour))
	require.EqualError(t, err, "invalid: the silence lasts 5h0m0s, at most 4h0m0s (serve --silence-max-duration): silence for less, and again when it ends if needed")
	short.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	err = short.Silence(ctx, short.Incidents()[0].ID, "alice", 5*time.Hour, "x")
	require.ErrorContains(t, err, "at most 4h0m0s", "an incident's silence (Slack's Silence…) is bounded too")
	require.Empty(t, short.Silences())
}

// One creator may have silence.MaxPerCreator pending or active silences; expiring one makes room, and another
// creator is not counted against it.
func TestSilencesPerCreatorAreBounded(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	tr := newTestTracker(t, TrackerOptions{Now: c.Now})
	var first string
	for i := range silence.MaxPerCreator {
		s, err := tr.CreateSilence(ctx, shopSilence(c, time.Hour))
		require.NoError(t, err, "silence %d", i)
		if i == 0 {
			first = s.ID
		}
	}
	_, err := tr.CreateSilence(ctx, shopSilence(c, time.Hour))
	require.ErrorIs(t, err, ErrLimited)
	require.EqualError(t, err, "limit reached: alice has 50 pending or active silences, at most 50: expire some first")
	bob := shopSilence(c, time.Hour)
	bob.CreatedBy = "bob"
	_, err = tr.CreateSilence(ctx, bob)
	require.NoError(t, err, "bob's first silence")
	require.NoError(t, tr.ExpireSilence(ctx, first))
	_, err = tr.CreateSilence(ctx, shopSilence(c, time.Hour))
	require.NoError(t, err, "an expired silence makes room")
	require.Len(t, tr.Silences(), silence.MaxPerCreator+2)
}

// The silences' stored form is bounded: expired silences make room first, and when the live ones alone are too large
// a new one is refused, naming the bound, and nothing is saved.
func TestSilencesStoredSizeIsBounded(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	store := &MemoryStore{}
	tr := newTestTracker(t, TrackerOptions{Store: store, Now: c.Now})
	big := func(by string) silence.Silence {
		s := shopSilence(c, time.Hour)
		s.CreatedBy, s.Comment = by, strings.Repeat("x", silence.MaxComment)
		for i := range 14 {
			s.Matchers = append(s.Matchers, silence.Matcher{Name: silence.LabelNamespace, Value: fmt.Sprintf("%d-%s", i, strings.Repeat("n", 1000))})
		}
		return s
	}
	var old string
	made := 0
	for i := 0; ; i++ {
		s, err := tr.CreateSilence(ctx, big(fmt.Sprintf("user-%d", i)))
		if err != nil {
			require.ErrorIs(t, err, ErrLimited)
			require.ErrorContains(t, err, "at most 768 KiB: expire some, or write shorter comments and fewer matchers")
			break
		}
		if i == 0 {
			old = s.ID
		}
		made++
	}
	require.Greater(t, made, 20)
	stored, err := store.LoadSilences(ctx)
	require.NoError(t, err)
	require.Len(t, stored, made, "the refused silence was not saved")
	b, err := encodeSilences(stored)
	require.NoError(t, err)
	require.LessOrEqual(t, len(b), maxSilencesBytes)
	require.Greater(t, len(b)+len(b)/made, maxSilencesBytes, "one more would not have fit")

	require.NoError(t, tr.ExpireSilence(ctx, old))
	_, err = tr.CreateSilence(ctx, big("carol"))
	require.NoError(t, err, "the expired silence made room")
	_, ok := tr.GetSilence(old)
	require.False(t, ok, "the expired silence was forgotten for the new one")
	require.Len(t, tr.Silences(), made)
}
