package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
)

func TestRemediesThatChangedSomethingAreFollowedByAReevaluation(t *testing.T) {
	subject := "argocd//argocd/checkout"
	tests := []struct {
		name  string
		ev    syncmedic.Event
		fired bool
	}{
		{"an applied remedy that changed something re-evaluates its subject",
			syncmedic.Event{Kind: syncmedic.EventRemediated, Attempt: &syncmedic.Attempt{Result: syncmedic.ResultSucceeded, Changed: true}}, true},
		{"a remedy that was already applied changes nothing and re-evaluates nothing",
			syncmedic.Event{Kind: syncmedic.EventRemediated, Attempt: &syncmedic.Attempt{Result: syncmedic.ResultSucceeded}}, false},
		{"a dry-run re-evaluates nothing",
			syncmedic.Event{Kind: syncmedic.EventRemediated, Attempt: &syncmedic.Attempt{Result: syncmedic.ResultDryRun}}, false},
		{"a failed remedy re-evaluates nothing",
			syncmedic.Event{Kind: syncmedic.EventRemediated, Attempt: &syncmedic.Attempt{Result: syncmedic.ResultFailed, Changed: true}}, false},
		{"a remedy that has only started re-evaluates nothing",
			syncmedic.Event{Kind: syncmedic.EventRemediating, Attempt: &syncmedic.Attempt{Result: syncmedic.ResultStarted}}, false},
		{"an incident that opens re-evaluates nothing", syncmedic.Event{Kind: syncmedic.EventOpened}, false},
	}
	saved := remedyRecheck
	remedyRecheck = nil // the immediate re-evaluation only: no timers in a unit test
	t.Cleanup(func() { remedyRecheck = saved })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var published, fired []string
			tr := &triggers{}
			tr.Handle("argocd/", func(s string) { fired = append(fired, s) })
			p := reevaluateAfterRemedies(syncmedic.PublisherFunc(func(ev syncmedic.Event) { published = append(published, string(ev.Kind)) }), tr)
			tt.ev.Incident.Subject = subject
			p.Publish(tt.ev)
			require.Equal(t, []string{string(tt.ev.Kind)}, published, "every event reaches the notifiers")
			if tt.fired {
				require.Equal(t, []string{subject}, fired)
			} else {
				require.Empty(t, fired)
			}
		})
	}
}
