package remedy

import (
	"context"
	"fmt"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
)

// resume finishes a remedy that a replica cut off after a checkpoint (its write-ahead record says what was pending):
// the interrupted attempt is closed as such, a new write-ahead record is saved for the rest (so that a second cut
// leaves a record without a checkpoint, reported "may have run", never resumed twice), and the remedier's Resume
// does the pending writes under the policy in force now, asked right before each of them.
func (s *RemediationStage) resume(ctx context.Context, t incident.Ledger, inc incident.Incident, rem syncmedic.Resumer, cut incident.Attempt) {
	f, action := inc.Finding, inc.Finding.Remedy.Action
	ctx, done := s.begin(ctx)
	defer done()
	closed := cut
	closed.Result, closed.Pending = incident.ResultFailed, ""
	closed.Error = fmt.Sprintf("interrupted after its checkpoint: %s started at %s was cut off (the replica applying it stopped or lost the lead) with %q still to do; the next leader resumes it",
		action, cut.At.UTC().Format(time.RFC3339), cut.Pending)
	if err := t.RecordAttempt(ctx, inc.ID, closed, incident.EventRemediated); err != nil {
		s.log.Warn("remediation not resumed: the interrupted attempt was not recorded", "incident", inc.ID, "action", action, "err", err)
		return
	}
	refused := func(pol *policy.Policy) string { return resumeRefused(pol, f, cut.RequestedBy) }
	start := t.Now()
	reason := fmt.Sprintf("resuming %q after the checkpoint of the attempt started at %s", cut.Pending, cut.At.UTC().Format(time.RFC3339))
	if err := t.RecordAttempt(ctx, inc.ID, incident.Attempt{At: start, Action: action, Result: incident.ResultStarted, Reason: reason, RequestedBy: cut.RequestedBy}, incident.EventRemediating); err != nil {
		s.log.Warn("remediation not resumed: its write-ahead record was not saved", "incident", inc.ID, "action", action, "err", err)
		return
	}
	gate := func(context.Context, string) string { return refused(t.Policy()) }
	out, err := rem.Resume(syncmedic.WithWriteGate(ctx, gate), f, cut.Pending)
	a := incident.Attempt{At: start, Action: action, Result: incident.ResultSucceeded, Changed: out.Changed, Steps: out.Steps, Reason: reason, RequestedBy: cut.RequestedBy}
	if err != nil {
		a.Result, a.Error, a.Permanent = incident.ResultFailed, err.Error(), syncmedic.IsPermanent(err)
	}
	s.limiter.Record(syncmedic.RemedyKey(f), start, err == nil)
	s.metrics.remediation(f.Rule, action, a.Result)
	s.log.Info("remediation resumed", "who", s.identity, "action", action, "pending", cut.Pending, "result", a.Result, "changed", a.Changed,
		"steps", a.Steps, "incident", inc.ID, "rule", f.Rule, "app", f.Object.App, "err", a.Error)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if rerr := t.RecordAttempt(rctx, inc.ID, a, incident.EventRemediated); rerr != nil {
		s.log.Error("the resumed remediation's result was not recorded", "incident", inc.ID, "action", action, "result", a.Result, "err", rerr)
	}
}

// resumeRefused is why the policy in force refuses the rest of a remedy cut off after its checkpoint: the automatic
// policy for an automatic remedy; for a fix on demand, the kill switch, a rule turned off or the object taken out of
// scope (the person's confirmation covered the whole remedy).
func resumeRefused(pol *policy.Policy, f syncmedic.Finding, requestedBy string) string {
	if requestedBy == "" {
		if d := pol.Decide(f); !d.Act {
			return d.Reason
		}
		return ""
	}
	r := pol.For(f.Rule)
	switch {
	case pol.KillSwitch:
		return "the kill switch is on: syncmedic takes no action, on demand or not"
	case r.Mode == policy.ModeOff:
		return fmt.Sprintf("policy: %s is off", f.Rule)
	case !policy.InScope(r.Namespaces, f.Object.Namespace) || !policy.InScope(r.Projects, f.Object.Project):
		return fmt.Sprintf("policy: %s on %s is out of the rule's namespaces or projects", f.Rule, f.Object)
	}
	return ""
}
