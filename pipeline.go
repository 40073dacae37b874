package syncmedic

import (
	"context"
	"errors"
)

// Sink receives the findings of one evaluation of one subject. A subject is whatever a source evaluates as a unit:
// an Argo CD application ("argocd/<instance>/<app-namespace>/<app>"), a HelmRelease ("flux/<namespace>/<name>"),
// the cluster checks ("kube/<cluster>"). Reporting a subject with no findings tells the tracker that the incidents
// previously opened under it stopped matching this time.
type Sink interface {
	Observe(ctx context.Context, subject string, findings []Finding)
}

// GoneSink is a Sink that can also be told that a subject no longer exists, so that what was open under it closes
// at once instead of waiting for evaluations that will never come. The Tracker is one.
type GoneSink interface {
	Sink
	Gone(ctx context.Context, subject string)
}

// ReportGone tells sink that subject was deleted: Gone when the sink is a GoneSink, else an evaluation with no
// findings.
func ReportGone(ctx context.Context, sink Sink, subject string) {
	if g, ok := sink.(GoneSink); ok {
		g.Gone(ctx, subject)
		return
	}
	sink.Observe(ctx, subject, nil)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ctx context.Context, subject string, findings []Finding)

// Observe calls f.
func (f SinkFunc) Observe(ctx context.Context, subject string, findings []Finding) {
	f(ctx, subject, findings)
}

// Outcome is what a remediation did, or would do in dry-run.
type Outcome struct {
	Action ActionID `json:"action"`
	DryRun bool     `json:"dryRun"`
	// Changed is true when the action changed something (false when it was already applied: actions are idempotent).
	Changed bool `json:"changed"`
	// Steps describe each API call made (or that would be made in dry-run), in order, for the audit trail.
	Steps []string `json:"steps"`
}

// Remedier applies the remedy of a finding through the owning tool's API (never by patching objects behind the
// tool's back). Implementations are idempotent. With dryRun they make no change and return the steps they would take.
type Remedier interface {
	Remediate(ctx context.Context, f Finding, dryRun bool) (Outcome, error)
}

// RemedierFunc adapts a function to a Remedier.
type RemedierFunc func(ctx context.Context, f Finding, dryRun bool) (Outcome, error)

// Remediate calls f.
func (f RemedierFunc) Remediate(ctx context.Context, fd Finding, dryRun bool) (Outcome, error) {
	return f(ctx, fd, dryRun)
}

// permanentError marks an error that retrying cannot fix (a permission denied, an invalid request).
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that IsPermanent reports true: callers must not retry it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Source is a long-running producer of findings: a watcher of Argo CD applications, of HelmReleases, a cluster
// scanner. Run reports every evaluation of a subject to sink (an empty list too: that is how incidents resolve) and
// returns when ctx is cancelled (nil) or on an error it cannot recover from.
type Source interface {
	Run(ctx context.Context, sink Sink) error
}

// SourceFunc adapts a function to a Source.
type SourceFunc func(ctx context.Context, sink Sink) error

// Run calls f.
func (f SourceFunc) Run(ctx context.Context, sink Sink) error { return f(ctx, sink) }

// Remediers maps each action to the Remedier that applies it through the owning tool's API.
type Remediers map[ActionID]Remedier
