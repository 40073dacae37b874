package flux

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// onEveryChange is an informer handler that calls changed with the object of every add, update and delete.
func onEveryChange(changed func(o interface{})) toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, o interface{}) { changed(o) },
		DeleteFunc: changed,
	}
}

// namespaced limits cache options to namespaces; none means every namespace.
func namespaced(copts cache.Options, namespaces []string) cache.Options {
	if len(namespaces) > 0 {
		copts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			copts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return copts
}

// runQueue starts the informer cache c, calls synced once it has synced, then evaluates each key queued in q until
// ctx is cancelled; it returns the cache's error, or nil when ctx ends first. what names the watcher in errors.
func runQueue[K comparable](ctx context.Context, what string, c cache.Cache, q workqueue.TypedDelayingInterface[K], synced func(), evaluate func(K)) error {
	cacheErr := make(chan error, 1)
	go func() { cacheErr <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%s: informers did not sync: %w", what, <-cacheErr)
	}
	synced()
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	for {
		key, shutdown := q.Get()
		if shutdown {
			return <-cacheErr
		}
		evaluate(key)
		q.Done(key)
	}
}
