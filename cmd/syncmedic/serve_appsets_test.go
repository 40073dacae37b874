package main

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
)

func TestRunWithAppSetsEndsThePollerWithTheWatcher(t *testing.T) {
	stopped := errors.New("watch refused")
	pollerDone := make(chan struct{})
	watcher := syncmedic.SourceFunc(func(ctx context.Context, _ syncmedic.Sink) error { return stopped })
	poller := syncmedic.SourceFunc(func(ctx context.Context, _ syncmedic.Sink) error {
		<-ctx.Done()
		close(pollerDone)
		return nil
	})
	err := runWithAppSets(context.Background(), syncmedic.SinkFunc(func(context.Context, string, []syncmedic.Finding) {}), watcher, poller)
	require.ErrorIs(t, err, stopped, "the watcher's error is the part's")
	select {
	case <-pollerDone:
	default:
		t.Fatal("the poller still runs after the watcher stopped")
	}
}
