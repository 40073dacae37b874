package remedy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic/policy"
)

func TestRateLimiter(t *testing.T) {
	c := newClock()
	l := NewRateLimiter(c.Now)
	rl := policy.RateLimit{Max: 2, Window: policy.Duration(time.Hour), Backoff: policy.Duration(time.Minute), MaxBackoff: policy.Duration(3 * time.Minute)}
	t.Run("at most Max actions per window", func(t *testing.T) {
		for range 2 {
			ok, _, _ := l.Allow("a", rl)
			require.True(t, ok)
			l.Record("a", c.Now(), true)
		}
		ok, retryAt, why := l.Allow("a", rl)
		require.False(t, ok)
		require.Equal(t, c.Now().Add(time.Hour), retryAt)
		require.Contains(t, why, "rate limit")
		c.Advance(time.Hour + time.Second)
		ok, _, _ = l.Allow("a", rl)
		require.True(t, ok)
	})
	t.Run("failures back off exponentially up to the maximum", func(t *testing.T) {
		rl := rl
		rl.Max = 100
		for _, wait := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 3 * time.Minute} {
			l.Record("b", c.Now(), false)
			ok, retryAt, why := l.Allow("b", rl)
			require.False(t, ok)
			require.Equal(t, c.Now().Add(wait), retryAt)
			require.Contains(t, why, "backing off")
			c.Advance(wait)
			ok, _, _ = l.Allow("b", rl)
			require.True(t, ok)
		}
		l.Record("b", c.Now(), true)
		ok, _, _ := l.Allow("b", rl)
		require.True(t, ok, "a success ends the backoff")
	})
}
