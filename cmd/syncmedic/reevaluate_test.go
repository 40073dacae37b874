package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic/incident"
)

func TestRemediesThatChangedSomethingAreFollowedByAReevaluation(t *testing.T) {
	subject := "argocd//argocd/checkout"
	tests := []struct {
		name  string
		ev    incident.Event
		fired bool
	}{
		{"an applied remedy that changed something re-evaluates its subject",
			incident.Event{Kind: incident.EventRemediated, Attempt: &incident.Attempt{Result: incident.ResultSucceeded, Changed: true}}, true},
		{"a remedy that was already applied changes nothing and re-evaluates nothing",
			incident.Event{Kind: incident.EventRemediated, Attempt: &incident.Attempt{Result: incident.ResultSucceeded}}, false},
		{"a dry-run re-evaluates nothing",
			incident.Event{Kind: incident.EventRemediated, Attempt: &incident.Attempt{Result: incident.ResultDryRun}}, false},
		{"a failed remedy re-evaluates nothing",
			incident.Event{Kind: incident.EventRemediated, Attempt: &incident.Attempt{Result: incident.ResultFailed, Changed: true}}, false},
		{"a remedy that has only started re-evaluates nothing",
			incident.Event{Kind: incident.EventRemediating, Attempt: &incident.Attempt{Result: incident.ResultStarted}}, false},
		{"an incident that opens re-evaluates nothing", incident.Event{Kind: incident.EventOpened}, false},
	}
	saved := remedyRecheck
	remedyRecheck = nil // the immediate re-evaluation only: no timers in a unit test
	t.Cleanup(func() { remedyRecheck = saved })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var published, fired []string
			tr := &triggers{}
			tr.Handle("argocd/", func(s string) { fired = append(fired, s) })
			p := reevaluateAfterRemedies(incident.PublisherFunc(func(ev incident.Event) { published = append(published, string(ev.Kind)) }), tr)
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
