package incident

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/policy"
)

// failingStore fails every save while err is set.
type failingStore struct {
	MemoryStore
	err error
}

func (s *failingStore) Save(ctx context.Context, incs []Incident) error {
	if s.err != nil {
		return s.err
	}
	return s.MemoryStore.Save(ctx, incs)
}

// TestRecordAttemptIsTheWriteAheadLog: the started attempt is saved before the remedy writes, and says whether it
// was; a remedy the policy stopped after it leaves the incident firing, with one attempt.
func TestRecordAttemptIsTheWriteAheadLog(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	store := &failingStore{}
	leading := true
	tr := newTestTracker(t, TrackerOptions{Store: store, Now: c.Now, Leader: func() bool { return leading }})
	tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	id := tr.Incidents()[0].ID
	started := Attempt{At: c.Now(), Action: syncmedic.ActionRemoveHookFinalizer, Result: ResultStarted}

	store.err = errors.New("etcdserver: request timed out")
	require.EqualError(t, tr.RecordAttempt(ctx, id, started, EventRemediating), "etcdserver: request timed out")
	store.err = nil
	require.NoError(t, tr.RecordAttempt(ctx, id, started, EventRemediating))
	saved, err := store.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, ResultStarted, saved[0].LastAttempt().Result)
	require.Equal(t, StateRemediating, saved[0].State)

	stopped := started
	stopped.Result, stopped.Reason = ResultDryRun, "not applied, nothing was changed: the kill switch is on"
	require.NoError(t, tr.RecordAttempt(ctx, id, stopped, EventRemediated))
	inc, _ := tr.Get(id)
	require.Equal(t, []Attempt{stopped}, inc.Attempts)
	require.Equal(t, StateFiring, inc.State, "nothing is being done")

	leading = false
	require.ErrorIs(t, tr.RecordAttempt(ctx, id, started, EventRemediating), ErrNotLeading, "a follower starts nothing")
	inc, _ = tr.Get(id)
	require.Equal(t, []Attempt{stopped}, inc.Attempts)
}

// TestAResultRecordedAfterTheLeadWasLostIsKept: the replica that started a remedy loses the lead before it ends;
// its result is merged into the state ConfigMap (not dropped, not overwriting the rest), so the next leader loads it.
func TestAResultRecordedAfterTheLeadWasLostIsKept(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	store := &ConfigMapStore{Client: fake.NewSimpleClientset(), Namespace: "syncmedic", Name: "syncmedic-state"}
	pol := func() *policy.Policy { return policy.DefaultPolicy() }
	leading := true
	old := newTestTracker(t, TrackerOptions{Store: store, Now: c.Now, Policy: pol, Leader: func() bool { return leading }})
	old.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate"), hookFinding("shop", "seed")})
	var id string
	for _, inc := range old.Incidents() {
		if inc.Finding.Object.Name == "migrate" {
			id = inc.ID
		}
	}
	started := Attempt{At: c.Now(), Action: syncmedic.ActionRemoveHookFinalizer, Result: ResultStarted}
	require.NoError(t, old.RecordAttempt(ctx, id, started, EventRemediating))

	leading = false // the Lease was lost while the remedy ran
	done := started
	done.Result, done.Changed, done.Steps = ResultSucceeded, true, []string{"PatchResource remove finalizer"}
	require.NoError(t, old.RecordAttempt(ctx, id, done, EventRemediated))
	unrelated := Attempt{At: c.Now(), Action: syncmedic.ActionRemoveHookFinalizer, Result: ResultSucceeded}
	require.ErrorIs(t, old.RecordAttempt(ctx, id, unrelated, EventRemediated), ErrNotLeading, "only the result of its own write-ahead record")

	next := newTestTracker(t, TrackerOptions{Store: store, Now: c.Now, Policy: pol})
	var got []Attempt
	for _, inc := range next.Incidents() {
		if inc.ID == id {
			got = inc.Attempts
		} else {
			require.Empty(t, inc.Attempts, "the other incident is left as it was")
		}
	}
	require.Len(t, next.Incidents(), 2)
	require.Len(t, got, 1)
	require.Equal(t, ResultSucceeded, got[0].Result)
	require.Equal(t, []string{"PatchResource remove finalizer"}, got[0].Steps)
}
