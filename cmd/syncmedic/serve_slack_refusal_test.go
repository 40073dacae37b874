package main

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/incident"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
)

// A Silence… click the tracker refuses shows the clicker why: a bound reached (a silence too long, too many of the
// member's silences) is final, a replica that does not lead says to retry.
func TestSlackShowsWhyTheTrackerRefusedASilence(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		retry time.Duration
	}{
		{"too long", fmt.Errorf("%w: the silence lasts 8d, at most 7d (serve --silence-max-duration)", incident.ErrInvalid), 0},
		{"too many", fmt.Errorf("%w: slack user alice (U024BE7LH) has 50 pending or active silences, at most 50: expire some first", incident.ErrLimited), 0},
		{"not the leader", incident.ErrNotLeading, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r *slacknotify.Refused
			require.True(t, errors.As(engineRefusal(tc.err), &r), "a refusal the clicker sees, not an internal error")
			require.Equal(t, tc.err.Error(), r.Msg)
			require.Equal(t, tc.retry, r.RetryAfter)
		})
	}
}
