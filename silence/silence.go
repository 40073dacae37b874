package silence

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic"
)

// The names a matcher can match on: the finding's rule; the object's namespace, kind and name; the Argo CD
// Application or Flux HelmRelease that owns the object (the incident's owner, as syncmedic_incident_open's app label),
// that owner's namespace and, for an Argo CD Application, its project.
const (
	LabelRule         = "rule"
	LabelNamespace    = "namespace"
	LabelKind         = "kind"
	LabelApp          = "app"
	LabelAppNamespace = "appNamespace"
	LabelProject      = "project"
	LabelName         = "name"
)

// LabelNames are the names a matcher can match on, in the order ForFinding gives them.
var LabelNames = []string{LabelRule, LabelNamespace, LabelKind, LabelApp, LabelAppNamespace, LabelProject, LabelName}

// Labels is what a silence matches: the LabelNames of a finding.
type Labels map[string]string

// LabelsOf returns the labels of f. app is the Argo CD Application (appNamespace its namespace, project its
// project), or for Flux the HelmRelease the object is or was applied by (appNamespace its namespace; no project), so a
// silence pinned to one team's Application named web mutes neither another project's web nor a HelmRelease web.
func LabelsOf(f syncmedic.Finding) Labels {
	o := f.Object
	l := Labels{LabelRule: string(f.Rule), LabelNamespace: o.Namespace, LabelKind: o.Kind, LabelName: o.Name,
		LabelApp: o.App, LabelAppNamespace: o.AppNamespace, LabelProject: o.Project}
	if o.App == "" && o.Tool == syncmedic.ToolFlux {
		if ns, name, ok := o.HelmRelease(); ok {
			if ns == "" {
				ns = o.Namespace
			}
			l[LabelApp], l[LabelAppNamespace] = name, ns
		}
	}
	return l
}

// Matcher matches one label exactly, or (IsRegex) with a regular expression anchored at both ends, like
// Alertmanager's =~ ("shop-.*" matches "shop-eu", not "my-shop-eu").
type Matcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex,omitempty"`

	re *regexp.Regexp
}

// maxMatchers bounds the matchers of one silence, maxValue the length of a matcher's value.
const (
	maxMatchers = 16
	maxValue    = 1024
	// MaxComment bounds a silence's comment.
	MaxComment = 4096
)

// compile validates m and prepares its regular expression.
func (m *Matcher) compile() error {
	if !slices.Contains(LabelNames, m.Name) {
		return fmt.Errorf("matcher name %q: want one of %s", m.Name, strings.Join(LabelNames, ", "))
	}
	if len(m.Value) > maxValue {
		return fmt.Errorf("matcher %s: the value is longer than %d characters", m.Name, maxValue)
	}
	if !m.IsRegex {
		m.re = nil
		return nil
	}
	re, err := regexp.Compile("^(?:" + m.Value + ")$")
	if err != nil {
		return fmt.Errorf("matcher %s=~%q: not a regular expression (Go RE2 syntax): %v", m.Name, m.Value, err)
	}
	m.re = re
	return nil
}

// Matches reports whether the label value v matches.
func (m *Matcher) Matches(v string) bool {
	if !m.IsRegex {
		return v == m.Value
	}
	if m.re == nil {
		if m.compile() != nil {
			return false
		}
	}
	return m.re.MatchString(v)
}

// String renders the matcher as Alertmanager does: name="value" or name=~"value".
func (m Matcher) String() string {
	op := "="
	if m.IsRegex {
		op = "=~"
	}
	return fmt.Sprintf("%s%s%q", m.Name, op, m.Value)
}

// State is where a silence is in its time window.
type State string

// The states of a silence; they are also the state label of syncmedic_silences.
const (
	StatePending State = "pending"
	StateActive  State = "active"
	StateExpired State = "expired"
)

// Silence mutes the incidents its matchers all match between StartsAt and EndsAt: they are tracked and shown but
// neither announced nor remedied automatically.
type Silence struct {
	ID        string    `json:"id"`
	Matchers  []Matcher `json:"matchers"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`
	// UpdatedAt is when the silence was created or last expired.
	UpdatedAt time.Time `json:"updatedAt"`
}

// State returns the silence's state at now.
func (s *Silence) State(now time.Time) State {
	switch {
	case now.Before(s.StartsAt):
		return StatePending
	case now.Before(s.EndsAt):
		return StateActive
	default:
		return StateExpired
	}
}

// Matches reports whether every matcher of s matches l (its time window aside).
func (s *Silence) Matches(l Labels) bool {
	if len(s.Matchers) == 0 {
		return false
	}
	for i := range s.Matchers {
		if !s.Matchers[i].Matches(l[s.Matchers[i].Name]) {
			return false
		}
	}
	return true
}

// Validate checks a silence and prepares its matchers; errors name the field and the fix.
func (s *Silence) Validate() error {
	var errs []error
	if len(s.Matchers) == 0 {
		errs = append(errs, fmt.Errorf("matchers: at least one is required (%s)", strings.Join(LabelNames, ", ")))
	}
	if len(s.Matchers) > maxMatchers {
		errs = append(errs, fmt.Errorf("matchers: %d, at most %d", len(s.Matchers), maxMatchers))
	}
	for i := range s.Matchers {
		if err := s.Matchers[i].compile(); err != nil {
			errs = append(errs, fmt.Errorf("matchers[%d]: %w", i, err))
		}
	}
	if s.EndsAt.IsZero() {
		errs = append(errs, errors.New("endsAt: required (or give a duration such as \"2h\")"))
	} else if !s.EndsAt.After(s.StartsAt) {
		errs = append(errs, fmt.Errorf("endsAt: %s is not after startsAt %s", s.EndsAt.Format(time.RFC3339), s.StartsAt.Format(time.RFC3339)))
	}
	if strings.TrimSpace(s.CreatedBy) == "" {
		errs = append(errs, errors.New("createdBy: required"))
	}
	if strings.TrimSpace(s.Comment) == "" {
		errs = append(errs, errors.New("comment: required: say why the incidents are silenced"))
	}
	if len(s.Comment) > MaxComment {
		errs = append(errs, fmt.Errorf("comment: longer than %d characters", MaxComment))
	}
	return errors.Join(errs...)
}

// Clone returns a deep copy.
func (s *Silence) Clone() Silence {
	c := *s
	c.Matchers = append([]Matcher(nil), s.Matchers...)
	return c
}

// NewID returns a random silence ID (a UUID v4, as Alertmanager's).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ForFinding returns exact matchers on every label of f that is set (rule, namespace, kind, app, appNamespace, project,
// name): a silence of exactly this incident's kind of trouble on this object of this owner.
func ForFinding(f syncmedic.Finding) []Matcher {
	l := LabelsOf(f)
	var out []Matcher
	for _, n := range LabelNames {
		if l[n] != "" {
			out = append(out, Matcher{Name: n, Value: l[n]})
		}
	}
	return out
}

// Request is the body of a silence creation (POST /api/v1/silences): matchers, and either endsAt or a duration
// from startsAt (default now). Unknown fields are ignored.
type Request struct {
	Matchers []Matcher `json:"matchers"`
	StartsAt time.Time `json:"startsAt,omitempty"`
	EndsAt   time.Time `json:"endsAt,omitempty"`
	// Duration is a Go duration ("2h", "30m") or one in days or weeks ("7d", "1w"), an alternative to EndsAt.
	Duration string `json:"duration,omitempty"`
	Comment  string `json:"comment"`
}

// DecodeRequest parses a silence request and turns it into a silence by createdBy at now (not yet validated nor
// given an ID); errors say what is wrong with the JSON or the duration.
func DecodeRequest(b []byte, createdBy string, now time.Time) (Silence, error) {
	var r Request
	if err := json.Unmarshal(b, &r); err != nil {
		return Silence{}, fmt.Errorf("the silence is not valid JSON: %v (want {\"matchers\": [{\"name\": \"rule\", \"value\": \"...\"}], \"duration\": \"2h\", \"comment\": \"...\"})", err)
	}
	s := Silence{Matchers: r.Matchers, StartsAt: r.StartsAt, EndsAt: r.EndsAt, CreatedBy: createdBy, Comment: r.Comment}
	if s.StartsAt.IsZero() || s.StartsAt.Before(now) {
		s.StartsAt = now
	}
	if r.Duration != "" {
		if !r.EndsAt.IsZero() {
			return Silence{}, errors.New("give either endsAt or duration, not both")
		}
		d, err := ParseDuration(r.Duration)
		if err != nil || d <= 0 {
			return Silence{}, fmt.Errorf("duration %q: want a positive duration such as \"30m\", \"2h\" or \"7d\"", r.Duration)
		}
		s.EndsAt = s.StartsAt.Add(d)
	}
	return s, nil
}

// Sort orders silences as lists show them: active first, then pending, then expired, each by end time.
func Sort(ss []Silence, now time.Time) {
	rank := map[State]int{StateActive: 0, StatePending: 1, StateExpired: 2}
	sort.SliceStable(ss, func(i, j int) bool {
		ri, rj := rank[ss[i].State(now)], rank[ss[j].State(now)]
		if ri != rj {
			return ri < rj
		}
		if !ss[i].EndsAt.Equal(ss[j].EndsAt) {
			return ss[i].EndsAt.Before(ss[j].EndsAt)
		}
		return ss[i].ID < ss[j].ID
	})
}
