package silence

import (
	"testing"
	"time"

	"github.com/syncmedic/syncmedic"
)

// FuzzDecodeRequest: any body either decodes into a silence or is refused with an error; it never panics. A
// decoded silence that validates has at least one matcher, ends after it starts and does not start before now, and
// matching a finding with it never panics; an exact matcher matches only its own value.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"matchers": [{"name": "rule", "value": "argocd/hook-finalizer-stuck"}], "duration": "2h", "comment": "x"}`,
		`{"matchers": [{"name": "app", "value": "shop-.*", "isRegex": true}], "endsAt": "2026-03-10T14:00:00Z", "comment": "x"}`,
		`{"matchers": [{"name": "name", "value": "(", "isRegex": true}], "duration": "1h", "comment": "x"}`,
		`{"matchers": [], "duration": "-1h"}`,
		`{"matchers": [{"name": "namespace", "value": "a"}], "duration": "1h", "endsAt": "2026-03-10T14:00:00Z", "comment": "x", "extra": 1}`,
		`[]`, `null`, `{`,
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	fd := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Kind: "Job",
		Namespace: "shop", Name: "migrate", App: "shop-eu"}, "stuck")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeRequest(b, "alice", now)
		if err != nil {
			return
		}
		if s.StartsAt.Before(now) {
			t.Fatalf("startsAt %s before now", s.StartsAt)
		}
		if s.Validate() != nil {
			return
		}
		if len(s.Matchers) == 0 || !s.EndsAt.After(s.StartsAt) {
			t.Fatalf("a silence without matchers or end validated: %+v", s)
		}
		l := LabelsOf(fd)
		got := s.Matches(l)
		for _, m := range s.Matchers {
			if !m.IsRegex && m.Value != l[m.Name] && got {
				t.Fatalf("exact matcher %s matched %q", m, l[m.Name])
			}
		}
	})
}
