package main

import (
	"context"
	"sync"
	"testing"
	"time"

	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// treeProbe times argocd-server's ResourceTree (the first call of syncmedic's live-state read) for the stuck apps,
// one call a second in turn, from outside syncmedic: how long argocd-server itself takes to answer under the load.
type treeProbe struct {
	mu    sync.Mutex
	took  []time.Duration
	fails int
	stop  func()
}

func startTreeProbe(t testing.TB, stack *testenv.RealArgoCD, names func() []string) *treeProbe {
	t.Helper()
	apps := stack.Applications(t, stack.AdminToken(t))
	ctx, cancel := context.WithCancel(context.Background())
	p := &treeProbe{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			list := names()
			if len(list) == 0 {
				continue
			}
			name, ns := list[i%len(list)], stack.Namespace
			cctx, ccancel := context.WithTimeout(ctx, time.Minute)
			begin := time.Now()
			_, err := apps.ResourceTree(cctx, &applicationpkg.ResourcesQuery{ApplicationName: &name, AppNamespace: &ns})
			took := time.Since(begin)
			ccancel()
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			if err != nil {
				p.fails++
			} else {
				p.took = append(p.took, took)
			}
			p.mu.Unlock()
		}
	}()
	p.stop = func() { cancel(); <-done }
	t.Cleanup(p.stop)
	return p
}

// results stops the probe and returns the answer times and the number of failed calls.
func (p *treeProbe) results() ([]time.Duration, int) {
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.took...), p.fails
}
