package incident

import (
	"context"
	"github.com/syncmedic/syncmedic/internal/testclock"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/policy"
)

// newClock is the tests' settable time source.
func newClock() *testclock.Clock { return testclock.New() }

// events collects published events.
type events struct {
	mu  sync.Mutex
	evs []Event
}

func (e *events) Publish(ev Event) { e.mu.Lock(); e.evs = append(e.evs, ev); e.mu.Unlock() }

func (e *events) kinds() []EventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []EventKind
	for _, ev := range e.evs {
		out = append(out, ev.Kind)
	}
	return out
}

func (e *events) last() Event { e.mu.Lock(); defer e.mu.Unlock(); return e.evs[len(e.evs)-1] }

func hookFinding(ns, name string) syncmedic.Finding {
	f := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Group: "batch", Version: "v1", Kind: "Job",
		Namespace: ns, Name: name, App: "shop", Project: "default"}, "hook Job "+name+" is stuck terminating")
	f.Evidence = []syncmedic.Evidence{{Field: "metadata.finalizers", Value: "argocd.argoproj.io/hook-finalizer"}}
	f.Remedy = syncmedic.Remedy{Action: syncmedic.ActionRemoveHookFinalizer, AutoSafe: true, Description: "remove the finalizer",
		Commands: []string{"kubectl -n " + ns + " patch job " + name + " --type json -p '[...]'"}}
	return f
}

func newTestTracker(t *testing.T, o TrackerOptions) *Tracker {
	t.Helper()
	tr, err := NewTracker(context.Background(), o)
	require.NoError(t, err)
	return tr
}

func TestTrackerLifecycle(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	evs := &events{}
	tr := newTestTracker(t, TrackerOptions{Now: c.Now, Publisher: evs})
	const subject = "argocd/default/argocd/shop"
	f := hookFinding("shop", "migrate")

	t.Run("a new fingerprint opens one incident", func(t *testing.T) {
		tr.Observe(ctx, subject, []syncmedic.Finding{f, f})
		require.Equal(t, []EventKind{EventOpened}, evs.kinds())
		incs := tr.Incidents()
		require.Len(t, incs, 1)
		require.Equal(t, StateFiring, incs[0].State)
		require.Equal(t, f.Fingerprint, incs[0].Fingerprint)
	})
	t.Run("re-evaluating the same finding announces nothing new", func(t *testing.T) {
		c.Advance(time.Minute)
		tr.Observe(ctx, subject, []syncmedic.Finding{f})
		require.Equal(t, []EventKind{EventOpened}, evs.kinds())
	})
	t.Run("changed evidence updates the incident", func(t *testing.T) {
		g := f
		g.Evidence = append([]syncmedic.Evidence{}, f.Evidence...)
		g.Evidence = append(g.Evidence, syncmedic.Evidence{Field: "status.operationState.phase", Value: "Running"})
		tr.Observe(ctx, subject, []syncmedic.Finding{g})
		require.Equal(t, []EventKind{EventOpened, EventUpdated}, evs.kinds())
		require.Len(t, evs.last().Incident.Finding.Evidence, 2)
	})
	t.Run("it resolves only after three evaluations without the finding", func(t *testing.T) {
		tr.Observe(ctx, subject, nil)
		tr.Observe(ctx, "argocd/default/argocd/other", nil)
		tr.Observe(ctx, subject, nil)
		require.True(t, tr.Incidents()[0].IsOpen())
		tr.Observe(ctx, subject, nil)
		require.Equal(t, EventResolved, evs.last().Kind)
		require.Equal(t, StateResolved, tr.Incidents()[0].State)
	})
	t.Run("a finding that comes back opens a new incident", func(t *testing.T) {
		c.Advance(time.Minute)
		tr.Observe(ctx, subject, []syncmedic.Finding{f})
		require.Equal(t, EventOpened, evs.last().Kind)
		require.Len(t, tr.Incidents(), 2)
		require.NotEqual(t, tr.Incidents()[0].ID, tr.Incidents()[1].ID)
	})
}

func TestTrackerMissesResetWhenTheFindingReturns(t *testing.T) {
	ctx := context.Background()
	evs := &events{}
	tr := newTestTracker(t, TrackerOptions{Publisher: evs})
	f := hookFinding("shop", "migrate")
	for range 5 {
		tr.Observe(ctx, "s", []syncmedic.Finding{f})
		tr.Observe(ctx, "s", nil)
		tr.Observe(ctx, "s", nil)
	}
	require.Equal(t, []EventKind{EventOpened}, evs.kinds())
}

func TestTrackerRestartContinuesOpenIncidents(t *testing.T) {
	ctx := context.Background()
	store := &FileStore{Path: filepath.Join(t.TempDir(), "state.json")}
	f := hookFinding("shop", "migrate")

	first := &events{}
	tr := newTestTracker(t, TrackerOptions{Store: store, Publisher: first})
	tr.Observe(ctx, "s", []syncmedic.Finding{f})
	id := tr.Incidents()[0].ID
	tr.SetNote(ctx, id, "slack.ts", "1710072000.000100")
	tr.Observe(ctx, "s", nil)

	second := &events{}
	restarted := newTestTracker(t, TrackerOptions{Store: store, Publisher: second})
	t.Run("the open incident is not announced again", func(t *testing.T) {
		restarted.Observe(ctx, "s", []syncmedic.Finding{f})
		require.Empty(t, second.kinds())
		ts, ok := restarted.Note(id, "slack.ts")
		require.True(t, ok)
		require.Equal(t, "1710072000.000100", ts)
	})
	t.Run("its resolution is still announced", func(t *testing.T) {
		for range 3 {
			restarted.Observe(ctx, "s", nil)
		}
		require.Equal(t, []EventKind{EventResolved}, second.kinds())
		require.Equal(t, id, second.last().Incident.ID)
	})
}

func TestFollowerTracksButOnlyTheLeaderAnnounces(t *testing.T) {
	ctx := context.Background()
	store := &MemoryStore{}
	leading := false
	evs := &events{}
	tr := newTestTracker(t, TrackerOptions{Store: store, Publisher: evs, Leader: func() bool { return leading }})
	f := hookFinding("shop", "migrate")
	tr.Observe(ctx, "s", []syncmedic.Finding{f})
	require.Empty(t, evs.kinds(), "a follower publishes nothing")
	stored, err := store.Load(ctx)
	require.NoError(t, err)
	require.Empty(t, stored, "a follower writes nothing")

	leading = true
	tr.Observe(ctx, "s", []syncmedic.Finding{f})
	require.Equal(t, []EventKind{EventOpened}, evs.kinds(), "on becoming leader, what only memory knew is announced once")
	stored, err = store.Load(ctx)
	require.NoError(t, err)
	require.Len(t, stored, 1)
}

func TestTrackerIgnoresRulesThatAreOff(t *testing.T) {
	p, err := policy.LoadPolicy([]byte("rules:\n  argocd/hook-finalizer-stuck:\n    mode: off\n"))
	require.NoError(t, err)
	evs := &events{}
	tr := newTestTracker(t, TrackerOptions{Publisher: evs, Policy: func() *policy.Policy { return p }})
	tr.Observe(context.Background(), "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	require.Empty(t, evs.kinds())
	require.Empty(t, tr.Incidents())
}
