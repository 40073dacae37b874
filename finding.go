package syncmedic

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Severity says how urgently a finding needs a human.
type Severity int

// Severities, from least to most urgent.
const (
	SeverityInfo Severity = iota
	SeverityWarning
	SeverityCritical
)

// String returns the lower-case name used in output and configuration.
func (s Severity) String() string {
	switch s {
	case SeverityInfo:
		return "info"
	case SeverityWarning:
		return "warning"
	case SeverityCritical:
		return "critical"
	default:
		return fmt.Sprintf("severity(%d)", int(s))
	}
}

// MarshalText implements encoding.TextMarshaler.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Severity) UnmarshalText(b []byte) error {
	switch strings.ToLower(string(b)) {
	case "info":
		*s = SeverityInfo
	case "warning":
		*s = SeverityWarning
	case "critical":
		*s = SeverityCritical
	default:
		return fmt.Errorf("unknown severity %q: want info, warning or critical", string(b))
	}
	return nil
}

// Tools that own the objects findings are about.
const (
	ToolArgoCD        = "argocd"
	ToolFlux          = "flux"
	ToolKubernetes    = "kubernetes"
	ToolArgoWorkflows = "argo-workflows"
)

// ObjectRef names the object a finding is about, and the GitOps application that manages it when known.
type ObjectRef struct {
	// Tool is the tool whose object this is (ToolArgoCD, ToolFlux, ToolKubernetes, ToolArgoWorkflows).
	Tool string `json:"tool"`
	// Instance names the Argo CD server or cluster the object was seen through, when there is more than one.
	Instance  string `json:"instance,omitempty"`
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// UID is informational only: it is not part of the fingerprint, so a re-created object continues the incident.
	UID string `json:"uid,omitempty"`
	// App is the Argo CD Application managing the object ("name"), AppNamespace its namespace, Project its project.
	App          string `json:"app,omitempty"`
	AppNamespace string `json:"appNamespace,omitempty"`
	Project      string `json:"project,omitempty"`
	// FluxOwner is the Flux object that applied this object, as "Kind/namespace/name".
	FluxOwner string `json:"fluxOwner,omitempty"`
	// Labels are the labels of the Argo CD Application or Flux HelmRelease the finding is about, and SlackChannel
	// its syncmedic.io/slack-channel annotation: they route notifications (policy/routing.go) and are not part of the
	// fingerprint.
	Labels       map[string]string `json:"labels,omitempty"`
	SlackChannel string            `json:"slackChannel,omitempty"`
}

// HelmRelease names the Flux HelmRelease the object is about: the object itself, or the one that applied it (its
// FluxOwner "HelmRelease/namespace/name"); ok is false when neither.
func (o ObjectRef) HelmRelease() (namespace, name string, ok bool) {
	if o.Kind == "HelmRelease" {
		return o.Namespace, o.Name, true
	}
	kind, rest, found := strings.Cut(o.FluxOwner, "/")
	if !found || kind != "HelmRelease" {
		return "", "", false
	}
	if ns, n, qualified := strings.Cut(rest, "/"); qualified {
		return ns, n, true
	}
	return "", rest, true
}

// String renders the reference the way kubectl names objects: kind.group/namespace/name.
func (o ObjectRef) String() string {
	kind := o.Kind
	if o.Group != "" {
		kind += "." + o.Group
	}
	if o.Namespace == "" {
		return kind + "/" + o.Name
	}
	return kind + "/" + o.Namespace + "/" + o.Name
}

// Evidence is one observed fact behind a finding: a field and its value, with the time it became true when known.
type Evidence struct {
	Field string `json:"field"`
	Value string `json:"value"`
	// Since is when the fact was first true (a deletionTimestamp, an operation's startedAt); shown as an age.
	Since *time.Time `json:"since,omitempty"`
}

// String renders "field = value (age)".
func (e Evidence) String() string { return e.Format(time.Time{}) }

// Format renders the evidence with its age relative to now; a zero now leaves the age out.
func (e Evidence) Format(now time.Time) string {
	s := e.Field + " = " + e.Value
	if e.Since != nil && !now.IsZero() {
		s += " (" + HumanDuration(now.Sub(*e.Since)) + " ago)"
	}
	return s
}

// ActionID names a remedy syncmedic can apply through a tool's API. The IDs are part of the public interface.
type ActionID string

// The remedies syncmedic knows how to apply.
const (
	// ActionNone marks a finding that only notifies.
	ActionNone ActionID = ""
	// ActionRemoveHookFinalizer removes argocd.argoproj.io/hook-finalizer with Argo CD PatchResource (test + remove).
	ActionRemoveHookFinalizer ActionID = "argocd/remove-hook-finalizer"
	// ActionTerminateAndResync terminates the running operation and syncs the same revision with the same options.
	ActionTerminateAndResync ActionID = "argocd/terminate-and-resync"
	// ActionResyncOrphaned syncs the same revision with the same options again, without terminating, over an
	// operation state left Running with no operation (argocd-server refuses to terminate it).
	ActionResyncOrphaned ActionID = "argocd/resync-orphaned"
	// ActionTerminateOperation only terminates the running operation.
	ActionTerminateOperation ActionID = "argocd/terminate-operation"
	// ActionHardRefresh sets argocd.argoproj.io/refresh=hard through the Argo CD API.
	ActionHardRefresh ActionID = "argocd/hard-refresh"
	// ActionForceFinalizerRemoval sets spec.artifactGC.forceFinalizerRemoval=true on an Argo Workflow.
	ActionForceFinalizerRemoval ActionID = "workflows/force-finalizer-removal"
	// ActionFluxReconcile annotates reconcile.fluxcd.io/requestedAt, like `flux reconcile hr`.
	ActionFluxReconcile ActionID = "flux/reconcile"
	// ActionFluxForceReconcile annotates requestedAt and forceAt, like `flux reconcile hr --force`.
	ActionFluxForceReconcile ActionID = "flux/reconcile-force"
	// ActionFluxResetReconcile annotates requestedAt and resetAt, like `flux reconcile hr --reset`.
	ActionFluxResetReconcile ActionID = "flux/reconcile-reset"
	// ActionFluxReconcileKustomization annotates a Kustomization's reconcile.fluxcd.io/requestedAt, like
	// `flux reconcile kustomization`.
	ActionFluxReconcileKustomization ActionID = "flux/reconcile-kustomization"
)

// Remedy says how to fix a finding: the action syncmedic can take, and the exact commands a person can run instead.
type Remedy struct {
	Action ActionID `json:"action,omitempty"`
	// AutoSafe is true when the action may run unattended once the policy allows it.
	AutoSafe bool `json:"autoSafe"`
	// RerunsHooks is true when the action starts a new Argo CD sync, which deletes, recreates and runs every hook
	// of the application again (database migrations included). Such an action runs unattended only where the
	// policy sets rerunHooks: true for the rule.
	RerunsHooks bool `json:"rerunsHooks,omitempty"`
	// Description says in one sentence what the fix does and why it is safe.
	Description string `json:"description"`
	// Commands are the exact manual commands, ready to paste.
	Commands []string `json:"commands,omitempty"`
	// Params carries what the action needs that the object reference does not say (e.g. revision, patch).
	Params map[string]string `json:"params,omitempty"`
}

// Link is a URL worth opening, such as the Argo CD UI page of the application.
type Link struct {
	Title string `json:"title"`
	URL   string `json:"url"`
}

// Finding is what a rule reports: one stuck thing, its evidence and its fix.
type Finding struct {
	Rule     RuleID    `json:"rule"`
	Severity Severity  `json:"severity"`
	Object   ObjectRef `json:"object"`
	Summary  string    `json:"summary"`
	// Since is when the stuck condition started (used for the age column); zero when unknown.
	Since    time.Time  `json:"since,omitempty"`
	Evidence []Evidence `json:"evidence"`
	Remedy   Remedy     `json:"remedy"`
	Links    []Link     `json:"links,omitempty"`
	// Related are other objects the finding is about, each as its own rule would name it: the Applications that hold
	// an ApplicationSet's stalled rollout step (argocd/rollingsync-stalled). The Argo CD extension shows the finding on
	// their pages too. They are not part of the fingerprint.
	Related []ObjectRef `json:"related,omitempty"`
	// Advisories are version notes (an affected Argo CD or Flux release and the release that fixes it).
	Advisories  []string `json:"advisories,omitempty"`
	Fingerprint string   `json:"fingerprint"`
}

// Fingerprint returns the stable identity of a finding: the rule and the object's identity (tool, instance, group,
// kind, namespace, name). It does not include the UID, the evidence or the time, so re-evaluating the same stuck
// object yields the same fingerprint, and so does a re-created hook object of the same name.
func Fingerprint(rule RuleID, o ObjectRef) string {
	h := sha256.New()
	for _, part := range []string{string(rule), o.Tool, o.Instance, o.Group, o.Kind, o.Namespace, o.Name} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// WithFingerprint sets f.Fingerprint from its rule and object and returns f.
func (f Finding) WithFingerprint() Finding {
	f.Fingerprint = Fingerprint(f.Rule, f.Object)
	return f
}

// Age returns how long the condition has held at now, or zero when Since is unknown.
func (f Finding) Age(now time.Time) time.Duration {
	if f.Since.IsZero() || now.Before(f.Since) {
		return 0
	}
	return now.Sub(f.Since)
}

// HumanDuration renders a duration the way kubectl prints ages: 45s, 3m12s, 2h5m, 3d4h.
func HumanDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		m, s := int(d.Minutes()), int(d.Seconds())%60
		if s == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%ds", m, s)
	case d < 48*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	default:
		days, h := int(d.Hours())/24, int(d.Hours())%24
		if h == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%dh", days, h)
	}
}

// DropShadowed removes kube/stuck-terminating findings about an object another finding already explains (the
// specific rules carry the better evidence and remedy). Objects are matched by group, kind, namespace and name,
// whatever tool reported them. The order of the rest is kept.
func DropShadowed(fs []Finding) []Finding {
	key := func(o ObjectRef) string { return o.Group + "/" + o.Kind + "/" + o.Namespace + "/" + o.Name }
	specific := map[string]bool{}
	for _, f := range fs {
		if f.Rule != RuleStuckTerminating {
			specific[key(f.Object)] = true
		}
	}
	out := fs[:0:0]
	for _, f := range fs {
		if f.Rule == RuleStuckTerminating && specific[key(f.Object)] {
			continue
		}
		out = append(out, f)
	}
	return out
}

// SortFindings orders findings by severity (most urgent first), then rule, then object, stably.
func SortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Severity != b.Severity {
			return a.Severity > b.Severity
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Object.String() < b.Object.String()
	})
}

// SlackChannelAnnotation on an Argo CD Application or a Flux HelmRelease sends its incidents to that Slack channel
// (the way Argo CD Notifications' subscribe annotations work); it wins over the policy's routes.
const SlackChannelAnnotation = "syncmedic.io/slack-channel"
