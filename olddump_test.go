package syncmedic

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewOldDump(t *testing.T) {
	now := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	tests := []struct {
		name          string
		newest        time.Time
		wantNil       bool
		wantNow, days string
	}{
		{name: "no timestamp at all: nothing to say", newest: time.Time{}, wantNil: true},
		{name: "exactly a day old is not old", newest: now.Add(-24 * time.Hour), wantNil: true},
		{name: "a second over a day is old", newest: now.Add(-24*time.Hour - time.Second), wantNow: "2026-11-28T05:00:00Z", days: "1"},
		{name: "--now is rounded up to the next five minutes", newest: time.Date(2025, 6, 10, 13, 58, 2, 0, time.UTC), wantNow: "2025-06-10T14:00:00Z", days: "536"},
		{name: "a timestamp on five minutes is kept", newest: time.Date(2025, 6, 10, 14, 0, 0, 0, time.UTC), wantNow: "2025-06-10T14:00:00Z", days: "536"},
		{name: "an offset is printed in UTC", newest: time.Date(2025, 6, 10, 15, 58, 0, 0, time.FixedZone("CEST", 2*3600)), wantNow: "2025-06-10T14:00:00Z", days: "536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewOldDump(tt.newest, now)
			if tt.wantNil {
				require.Nil(t, d)
				return
			}
			require.NotNil(t, d)
			require.Equal(t, tt.wantNow, d.Now.Format(time.RFC3339))
			require.Equal(t, "The newest timestamp in this dump is "+tt.newest.UTC().Format(time.RFC3339)+" ("+tt.days+
				" days ago): ages are judged at now; add --now "+tt.wantNow+" to judge them as they were", d.Message)
		})
	}
}
