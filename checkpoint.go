package syncmedic

import "context"

// Checkpoint saves, on the write-ahead record of the remedy running under ctx, the writes it made so far (steps)
// and what it still has to do (pending), before it goes on: if it is cut off, the next leader finishes it with the
// remedier's Resumer. The remediation stage sets it.
type Checkpoint func(ctx context.Context, steps []string, pending string) error

type checkpointKey struct{}

// WithCheckpoint returns ctx carrying c (see RecordCheckpoint).
func WithCheckpoint(ctx context.Context, c Checkpoint) context.Context {
	return context.WithValue(ctx, checkpointKey{}, c)
}

// RecordCheckpoint saves a checkpoint through the Checkpoint of ctx; without one (the CLI, a test) it does nothing.
func RecordCheckpoint(ctx context.Context, steps []string, pending string) error {
	c, _ := ctx.Value(checkpointKey{}).(Checkpoint)
	if c == nil {
		return nil
	}
	return c(ctx, steps, pending)
}

// Resumer is a Remedier that can finish a remedy cut off after a checkpoint: pending is what that checkpoint said was
// left. Resume re-reads the live state and does the pending writes only while that state is still the one the
// remedy left (asking BeforeWrite before each); otherwise it makes no write and its steps say why.
type Resumer interface {
	Remedier
	Resume(ctx context.Context, f Finding, pending string) (Outcome, error)
}
