package silence

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"
)

// DefaultMaxDuration is how long a silence may last unless serve's --silence-max-duration says otherwise: a week, so
// a forgotten silence does not hide an application's trouble for good.
const DefaultMaxDuration = 7 * 24 * time.Hour

// MaxPerCreator bounds the silences one creator (CreatedBy) may have pending or active at once.
const MaxPerCreator = 50

// ParseDuration reads a duration as Go writes it ("90m", "1.5h") or as Alertmanager's amtool does, with days and
// weeks ("7d", "1w", "1d12h").
func ParseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: want a Go duration such as \"30m\" or \"2h\", or days and weeks such as \"7d\" or \"1w\"", s)
	}
	return time.Duration(d), nil
}

// FormatDuration writes d as ParseDuration reads it, in days when it lasts one or more ("7d", "1d12h0m0s", "2h0m0s").
func FormatDuration(d time.Duration) string {
	const day = 24 * time.Hour
	days, rest := d/day, d%day
	switch {
	case days == 0:
		return d.String()
	case rest == 0:
		return fmt.Sprintf("%dd", days)
	default:
		return fmt.Sprintf("%dd%s", days, rest)
	}
}

// Pins reports whether s matches only the incidents of one Argo CD Application: an exact (not regex) matcher on its
// name, its namespace and its project, each with that Application's value.
func (s *Silence) Pins(app, appNamespace, project string) bool {
	want := map[string]string{LabelApp: app, LabelAppNamespace: appNamespace, LabelProject: project}
	for _, m := range s.Matchers {
		if !m.IsRegex && want[m.Name] != "" && m.Value == want[m.Name] {
			delete(want, m.Name)
		}
	}
	return len(want) == 0
}

// Targeted reports whether s is about one application or object: it has an exact matcher with a value on app or on
// name. A silence that is not (a namespace, a rule, "app=~.*") can mute every application at once.
func (s *Silence) Targeted() bool {
	for _, m := range s.Matchers {
		if !m.IsRegex && m.Value != "" && (m.Name == LabelApp || m.Name == LabelName) {
			return true
		}
	}
	return false
}
