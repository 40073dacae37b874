package syncmedic

import (
	"context"
	"errors"
	"fmt"
)

// WriteGate decides, right before a Remedier sends one write (write names the call and its target, as the audit
// steps do), whether the write may still be made: it re-reads what allowed the remedy (the policy in force: the kill
// switch, the rule's mode and scope) and returns why not, or "" to let the write go.
type WriteGate func(ctx context.Context, write string) (refused string)

type writeGateKey struct{}

// WithWriteGate returns ctx carrying g: every write a Remedier makes under ctx asks g first (see BeforeWrite). The
// remediation stage sets it; a Remedier run without one (the CLI's `fix --offline`, a dry run) writes ungated.
func WithWriteGate(ctx context.Context, g WriteGate) context.Context {
	return context.WithValue(ctx, writeGateKey{}, g)
}

// BeforeWrite asks the WriteGate of ctx whether write may be sent now. Remediers call it immediately before each
// call that changes something (TerminateOperation, Sync, PatchResource, a hard refresh, a Flux reconcile request, a
// Workflow patch), after every read that led to it; a non-nil error (a *WriteRefusedError, permanent) means the
// write must not be sent.
func BeforeWrite(ctx context.Context, write string) error {
	g, _ := ctx.Value(writeGateKey{}).(WriteGate)
	if g == nil {
		return nil
	}
	if why := g(ctx, write); why != "" {
		return Permanent(&WriteRefusedError{Write: write, Reason: why})
	}
	return nil
}

// WriteRefusedError is a write that a WriteGate refused: it was not sent.
type WriteRefusedError struct {
	// Write names the call that was not sent.
	Write string
	// Reason is the gate's: what in the policy refuses it now.
	Reason string
}

func (e *WriteRefusedError) Error() string {
	return fmt.Sprintf("not sent: %s, refused right before it was sent: %s", e.Write, e.Reason)
}

// IsWriteRefused returns the refusal err wraps, if any.
func IsWriteRefused(err error) (*WriteRefusedError, bool) {
	var r *WriteRefusedError
	ok := errors.As(err, &r)
	return r, ok
}
