package remedy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
)

// FixErrorCode classifies why a fix on demand was refused; the incident API maps each to an HTTP status.
type FixErrorCode string

const (
	FixNotFound FixErrorCode = "NotFound"
	// FixForbidden: the policy does not let this caller (or anyone) fix this rule here.
	FixForbidden FixErrorCode = "Forbidden"
	// FixConflict: the incident is resolved, another remedy of the object is running, the plan changed since the
	// caller reviewed it (FixResult then holds the new plan), or the remedy's dry run refuses the object as it is
	// now (a permanent error).
	FixConflict FixErrorCode = "Conflict"
	// FixRateLimited: the object's rate limit is used up; RetryAfter says when to try again.
	FixRateLimited FixErrorCode = "RateLimited"
	// FixUnavailable: this replica is not the leader, or no remedier is configured for the action.
	FixUnavailable FixErrorCode = "Unavailable"
)

// FixError is a refused fix on demand.
type FixError struct {
	Code       FixErrorCode
	Msg        string
	RetryAfter time.Duration
}

func (e *FixError) Error() string { return e.Msg }

// FixRequest asks for the remedy of one incident. Without Confirm it is a dry-run: it returns the plan and the
// confirmation to send back. With Confirm the remedy is applied, unless the plan changed since.
type FixRequest struct {
	Caller  policy.Caller
	Confirm string
}

// FixResult is the plan of a dry-run or the outcome of a confirmed fix.
type FixResult struct {
	Incident string             `json:"incident"`
	Action   syncmedic.ActionID `json:"action"`
	DryRun   bool               `json:"dryRun"`
	// Steps are the API calls the remedy makes (dry-run) or made.
	Steps []string `json:"steps"`
	// Warnings say what the fix does besides unblocking: hooks that run again, a remedy not safe unattended.
	Warnings []string `json:"warnings"`
	// Confirm is what to send back to apply exactly this plan (dry-run only).
	Confirm string `json:"confirm,omitempty"`
	// AllowedBy is the policy's fixBy entry that let the caller fix.
	AllowedBy string                 `json:"allowedBy"`
	Result    incident.AttemptResult `json:"result,omitempty"`
	Changed   bool                   `json:"changed"`
	Error     string                 `json:"error,omitempty"`
}

// Fixer applies remedies on a person's request (fixes on demand), with the remediation stage's remediers, rate
// limiter and per-object claims, reading and recording the incident through the tracker's Ledger.
type Fixer struct {
	stage  *RemediationStage
	ledger incident.Ledger
}

// NewFixer returns the fixes on demand of the incidents in l, applied by stage (nil: every fix is unavailable).
func NewFixer(stage *RemediationStage, l incident.Ledger) *Fixer {
	return &Fixer{stage: stage, ledger: l}
}

// Fix plans (dry-run) or applies, on a person's request, the remedy of an open incident, as the policy's fixBy for
// its rule allows. The rule's mode must not be off, the kill switch off, the object within the rule's namespaces
// and projects, and its rate limit not used up; a remedy already running on the object, or a plan that changed
// since the caller reviewed it, is a conflict. An applied fix is recorded on the incident as an attempt naming the
// caller, so it reaches the audit log, the Slack thread and the Kubernetes Event like an automatic one.
func (x *Fixer) Fix(ctx context.Context, id string, req FixRequest) (FixResult, error) {
	s, t := x.stage, x.ledger
	inc, ok := t.Get(id)
	if !ok {
		return FixResult{}, &FixError{Code: FixNotFound, Msg: "no incident " + id}
	}
	f := inc.Finding
	res := FixResult{Incident: id, Action: f.Remedy.Action, DryRun: req.Confirm == "", Steps: []string{}, Warnings: fixWarnings(f)}
	if !inc.IsOpen() {
		return res, &FixError{Code: FixConflict, Msg: fmt.Sprintf("incident %s is %s: there is nothing to fix", id, inc.State)}
	}
	pol := t.Policy()
	r := pol.For(f.Rule)
	allowedBy, ferr := fixPermission(pol, f, req.Caller)
	if ferr != nil {
		return res, ferr
	}
	res.AllowedBy = allowedBy
	if s == nil || s.remediers[f.Remedy.Action] == nil {
		return res, &FixError{Code: FixUnavailable, Msg: fmt.Sprintf("no remedier for %s is configured in this syncmedic", f.Remedy.Action)}
	}
	if !t.Leading() {
		return res, &FixError{Code: FixUnavailable, Msg: "this replica is not the leader: retry, the leader answers", RetryAfter: 5 * time.Second}
	}
	if err := t.StoreError(); err != nil {
		return res, &FixError{Code: FixUnavailable, Msg: "the stored incidents are not loaded yet (" + err.Error() + "): retry", RetryAfter: 5 * time.Second}
	}
	keys := remedyKeys(id, f.Object)
	if !s.claim(keys...) {
		return res, &FixError{Code: FixConflict, Msg: "a remedy of this object (or of its application) is running now: wait for its result"}
	}
	defer s.release(keys...)
	rem := s.remediers[f.Remedy.Action]

	plan, err := rem.Remediate(ctx, f, true)
	if err != nil {
		res.Error = err.Error()
		if syncmedic.IsPermanent(err) {
			// The remedier read the object and refuses it as it is (a Workflow the controller would ignore the patch
			// on): no retry changes that.
			return res, &FixError{Code: FixConflict, Msg: "nothing will be applied: the remedy refuses this object as it is now: " + err.Error()}
		}
		return res, &FixError{Code: FixUnavailable, Msg: "the dry-run failed: " + err.Error(), RetryAfter: 10 * time.Second}
	}
	res.Steps = nonNilSteps(plan.Steps, f.Remedy.Commands)
	confirm := planDigest(inc, res.Steps)
	if req.Confirm == "" {
		res.Confirm = confirm
		s.log.Info("fix planned on demand", "who", req.Caller.String(), "allowedBy", allowedBy, "incident", id,
			"rule", f.Rule, "action", f.Remedy.Action, "steps", res.Steps)
		return res, nil
	}
	if req.Confirm != confirm {
		res.DryRun, res.Confirm = true, confirm
		return res, &FixError{Code: FixConflict, Msg: "the plan changed since it was reviewed (the object or the finding moved): review the new plan and confirm it"}
	}
	rl := *r.RateLimit
	if ok, retryAt, why := s.limiter.Allow(syncmedic.RemedyKey(f), rl); !ok {
		return res, &FixError{Code: FixRateLimited, Msg: "rate limit: " + why, RetryAfter: max(time.Second, retryAt.Sub(t.Now()))}
	}
	d := policy.Decision{Mode: r.Mode, Act: true, Reason: fmt.Sprintf("requested by %s; policy fixBy %q for %s", req.Caller, allowedBy, f.Rule)}
	a := s.applyAttempt(ctx, t, inc, rem, d, req.Caller.String(), func(pol *policy.Policy) string {
		if _, ferr := fixPermission(pol, f, req.Caller); ferr != nil {
			return ferr.Msg
		}
		return ""
	})
	res.DryRun, res.Steps, res.Result, res.Changed, res.Error = false, nonNilSteps(a.Steps, nil), a.Result, a.Changed, a.Error
	return res, nil
}

// fixPermission says whether the policy lets c fix f on demand, and the fixBy entry that allows it.
func fixPermission(pol *policy.Policy, f syncmedic.Finding, c policy.Caller) (string, *FixError) {
	r := pol.For(f.Rule)
	allowedBy, may := policy.MayFix(r.FixBy, c)
	switch {
	case f.Remedy.Action == syncmedic.ActionNone:
		return "", &FixError{Code: FixForbidden, Msg: fmt.Sprintf("nothing will be applied: this %s finding has no action syncmedic can apply (%s); run the commands of the incident by hand",
			f.Rule, strings.TrimSuffix(f.Remedy.Description, "."))}
	case r.Mode == policy.ModeOff:
		return "", &FixError{Code: FixForbidden, Msg: fmt.Sprintf("policy: %s is off", f.Rule)}
	case len(r.FixBy) == 0:
		return "", &FixError{Code: FixForbidden, Msg: fmt.Sprintf("policy: nobody may fix %s on demand; list who may in rules.%s.fixBy (or defaults.fixBy)", f.Rule, f.Rule)}
	case !may:
		return "", &FixError{Code: FixForbidden, Msg: fmt.Sprintf("policy: %s is not in fixBy (%s) for %s", c, strings.Join(r.FixBy, ", "), f.Rule)}
	case pol.KillSwitch:
		return "", &FixError{Code: FixForbidden, Msg: "the kill switch is on: syncmedic takes no action, on demand or not"}
	case !policy.InScope(r.Namespaces, f.Object.Namespace):
		return "", &FixError{Code: FixForbidden, Msg: fmt.Sprintf("policy: namespace %q is not in the allowed namespaces (%s) for %s", f.Object.Namespace, strings.Join(r.Namespaces, ", "), f.Rule)}
	case !policy.InScope(r.Projects, f.Object.Project):
		return "", &FixError{Code: FixForbidden, Msg: fmt.Sprintf("policy: Argo CD project %q is not in the allowed projects (%s) for %s", f.Object.Project, strings.Join(r.Projects, ", "), f.Rule)}
	}
	return allowedBy, nil
}

// MayFix says whether the policy in force lets c fix the open incident inc on demand; when not, why (the page
// shows its Fix button only when it may).
func (x *Fixer) MayFix(inc incident.Incident, c policy.Caller) (bool, string) {
	if !inc.IsOpen() {
		return false, "the incident is " + string(inc.State)
	}
	if _, err := fixPermission(x.ledger.Policy(), inc.Finding, c); err != nil {
		return false, err.Msg
	}
	return true, ""
}

// fixWarnings says plainly what a fix does besides unblocking.
func fixWarnings(f syncmedic.Finding) []string {
	w := []string{}
	if f.Remedy.RerunsHooks {
		w = append(w, "This starts a new sync: every hook of the application runs again (the default delete policy BeforeHookCreation deletes and recreates them), database migrations included.")
	}
	if !f.Remedy.AutoSafe && f.Remedy.Action != syncmedic.ActionNone {
		w = append(w, "syncmedic never applies this remedy unattended: read the evidence and the steps before you confirm.")
	}
	return w
}

func nonNilSteps(steps, fallback []string) []string {
	if len(steps) > 0 {
		return steps
	}
	if len(fallback) > 0 {
		return fallback
	}
	return []string{}
}

// planDigest identifies one plan: the incident, its finding as last evaluated, and the steps the dry-run gave. The
// steps name the live state the remedier planned against (terminate-and-resync: the operation's startedAt and
// phase), so a confirmation never applies to an operation other than the one reviewed; once that operation ended,
// the dry-run itself refuses, and so does the confirmation.
func planDigest(inc incident.Incident, steps []string) string {
	h := sha256.New()
	f := inc.Finding
	for _, s := range append([]string{inc.ID, string(f.Remedy.Action), f.Object.String(), f.Summary}, steps...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	for _, k := range slices.Sorted(maps.Keys(f.Remedy.Params)) {
		h.Write([]byte(k + "=" + f.Remedy.Params[k]))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:32]
}

// IsFixError reports whether err is a refused fix, and its code.
func IsFixError(err error) (*FixError, bool) {
	var fe *FixError
	ok := errors.As(err, &fe)
	return fe, ok
}
