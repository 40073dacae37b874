package argocd

import (
	"context"
	"sort"
	"time"

	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
)

// appState is what the watcher keeps per application: the last version seen, when its operation last changed,
// the live hooks last read (only for suspicious applications) and its threshold timer.
type appState struct {
	subject    string
	app        *v1alpha1.Application
	opSig      string
	stateSince time.Time
	reconciled []time.Time // the status.reconciledAt values seen, oldest first (rules.AppObservation.Reconciled)
	gen        uint64      // bumped on every new version of the application

	hooks         []*unstructured.Unstructured
	hooksKnown    bool
	liveSig       string    // operation signature the hooks were read for
	liveAt        time.Time // when they were read (zero: never)
	finalizerSeen bool
	fetching      bool
	fetchSig      string
	pending       bool // another read is wanted when the running one returns
	retry         bool // the last read failed transiently: read again after Resync

	timer    *time.Timer
	timerGen uint64

	// unseen: left out of a partial list (input.partial) since it was last seen. Its incidents stay as they were:
	// it is not evaluated again (nothing about it can be read meanwhile) until an event or a list shows it again.
	unseen bool
}

// loop owns every appState; it runs in Run's goroutine only, so nothing here needs a lock.
type loop struct {
	w    *Watcher
	ctx  context.Context
	sink syncmedic.Sink
	apps map[string]*appState
}

func (l *loop) handle(in input) {
	switch in.kind {
	case inListed:
		seen := make(map[string]bool, len(in.apps))
		for i := range in.apps {
			a := &in.apps[i]
			if l.upsert(a) {
				seen[l.subject(a)] = true
			}
		}
		var kept []string
		for key := range l.apps {
			switch {
			case seen[key]:
			case in.partial != "":
				kept = append(kept, key)
				l.apps[key].unseen = true
			default:
				l.remove(key)
			}
		}
		if len(kept) > 0 {
			// Not gone, unseen: resolving their incidents would say "fixed" about what nothing read, and they would
			// open again as new incidents once visible. A watch DELETED event, or the next complete list, removes
			// them.
			sort.Strings(kept)
			l.w.o.Log.Warn("argocd list leaves out applications watched before: kept as they were, their incidents open, until a complete list",
				"instance", l.w.o.Instance, "why", in.partial, "count", len(kept), "first", kept[0])
		}
	case inEvent:
		if in.ev == watch.Deleted {
			l.remove(l.subject(in.app))
			return
		}
		l.upsert(in.app)
	case inTimer:
		if st := l.apps[in.key]; st != nil && st.timerGen == in.gen && !st.unseen {
			l.evaluate(st, true)
		}
	case inFetched:
		l.fetched(in)
	case inTrigger:
		if st := l.apps[in.key]; st != nil && !st.unseen {
			l.evaluate(st, true)
		}
	}
}

func (l *loop) subject(a *v1alpha1.Application) string {
	return Subject(l.w.o.Instance, a.Namespace, a.Name)
}

// upsert records a new version of an application and evaluates it; it reports whether the application is watched.
func (l *loop) upsert(a *v1alpha1.Application) bool {
	if ns := l.w.o.AppNamespace; ns != "" && a.Namespace != ns {
		return false // Watch ignores the namespace filter unless a name is given
	}
	key := l.subject(a)
	st := l.apps[key]
	if st != nil && !newer(a.ResourceVersion, st.app.ResourceVersion) {
		if st.unseen {
			st.unseen = false
			l.evaluate(st, true) // seen again unchanged: evaluated as a threshold would have had it meanwhile
		}
		return true
	}
	if st != nil {
		st.unseen = false // seen again, changed: evaluated below as any new version
	}
	if st == nil {
		st = &appState{subject: key}
		l.apps[key] = st
		l.w.stats.apps.Add(1)
	}
	sig := rules.OperationSignature(a.Status.OperationState)
	if rules.Orphaned(a) {
		sig += "|no operation" // a person clearing .operation is a change: argocd/operation-orphaned counts from it
	}
	if st.app != nil && sig != st.opSig {
		st.stateSince = l.w.o.Now()
	}
	if r := a.Status.ReconciledAt; r != nil && (len(st.reconciled) == 0 || !st.reconciled[len(st.reconciled)-1].Equal(r.Time)) {
		st.reconciled = append(st.reconciled, r.Time)
		if len(st.reconciled) > rules.MaxReconciled {
			st.reconciled = append(st.reconciled[:0], st.reconciled[1:]...)
		}
	}
	st.opSig, st.app = sig, rules.Retained(a)
	st.gen++
	l.evaluate(st, false)
	return true
}

func (l *loop) remove(key string) {
	st := l.apps[key]
	if st == nil {
		return
	}
	if st.timer != nil {
		st.timer.Stop()
	}
	delete(l.apps, key)
	l.w.stats.apps.Add(-1)
	syncmedic.ReportGone(l.ctx, l.sink, key)
}

// evaluate runs the rules on st, first reading live hooks when the application is suspicious and the last read is
// stale (or force is set: a threshold or a trigger, when live objects may have changed without the application).
func (l *loop) evaluate(st *appState, force bool) {
	now := l.w.o.Now()
	need := rules.NeedsLive(st.app, st.finalizerSeen, now, l.w.o.Thresholds)
	if need == rules.LiveOnce && !l.w.leakCheck() {
		need = rules.LiveNone // this server never puts the finalizer on hooks (or the check is off)
	}
	switch need {
	case rules.LiveNow:
		if force || st.liveAt.IsZero() || st.liveSig != st.opSig || now.Sub(st.liveAt) >= l.w.o.Resync {
			l.startFetch(st, force)
			return
		}
	case rules.LiveOnce:
		if st.liveSig != st.opSig {
			l.startFetch(st, false)
			return
		}
	case rules.LiveNone:
		st.hooks, st.hooksKnown = nil, false
	}
	l.report(st, now)
}

// startFetch reads st's live hooks unless a read is already running. A running read of the same operation
// signature serves an update that forced nothing (a refresh of the application); only a forced re-evaluation or a
// changed operation asks for another read when it returns.
func (l *loop) startFetch(st *appState, force bool) {
	if st.fetching {
		if force || st.opSig != st.fetchSig {
			st.pending = true
		}
		return
	}
	st.fetching, st.fetchSig = true, st.opSig
	l.w.fetch(l.ctx, st.subject, st.gen, st.app)
}

// fetched records a read's result; if the application changed meanwhile, it is evaluated again (which reads again
// only when the operation changed or a read was forced meanwhile), else reported.
func (l *loop) fetched(in input) {
	st := l.apps[in.key]
	if st == nil {
		return
	}
	if st.unseen {
		// Read while the application was visible, answered after: an answer now (argocd-server refusing an
		// application the account may no longer get) says nothing about its hooks. Read again once it is seen.
		st.fetching, st.pending = false, false
		st.liveAt = time.Time{}
		return
	}
	readFor := st.liveSig
	st.fetching = false
	st.liveSig, st.liveAt, st.retry = st.fetchSig, l.w.o.Now(), false
	transient := in.err != nil && !syncmedic.IsPermanent(in.err)
	if transient {
		// Not read: the one look of a finished operation, like the reads of a suspicious one, is taken again after
		// Resync (the timer set by schedule), instead of never.
		st.liveSig, st.retry = readFor, true
	}
	switch {
	case in.err == nil:
		st.hooks, st.hooksKnown = in.hooks, true
		st.finalizerSeen = rules.HasHookFinalizer(in.hooks)
	case transient && st.hooksKnown && readFor == st.fetchSig:
		// A transient failure (argocd-server restarting, a dropped connection) says nothing about the hooks: keep
		// those last read for this same operation, so an open incident is not taken for resolved meanwhile.
		l.w.o.Log.Warn("argocd live state unavailable: keeping the hooks last read for this operation", "subject", st.subject, "error", in.err)
	default:
		l.w.o.Log.Warn("argocd live state unavailable: rules that need the hook objects stay silent", "subject", st.subject, "error", in.err)
		st.hooks, st.hooksKnown = nil, false
	}
	switch {
	case st.pending:
		st.pending = false
		l.startFetch(st, true)
	case in.gen != st.gen:
		l.evaluate(st, false)
	default:
		l.report(st, st.liveAt)
	}
}

func (l *loop) report(st *appState, now time.Time) {
	obs := rules.AppObservation{
		Instance: l.w.o.Instance, App: st.app, Hooks: st.hooks, HooksKnown: st.hooksKnown,
		ServerVersion: l.w.ServerVersion(), StateSince: st.stateSince, UIURL: l.w.o.UIURL, Reconciled: st.reconciled,
	}
	fs := rules.Evaluate(obs, now, l.w.o.Thresholds)
	l.w.stats.evals.Add(1)
	// One line per evaluation at debug level, like flux's "evaluated HelmRelease": the conformance near misses read
	// it to prove serve looked at the application (with its hooks read) and found nothing (docs/serve.md, Logs).
	l.w.o.Log.Debug("evaluated application", "subject", st.subject, "findings", len(fs), "hooksKnown", st.hooksKnown)
	l.sink.Observe(l.ctx, st.subject, fs)
	l.schedule(st, obs, now)
}

// schedule arms st's timer for the next threshold (and, while suspicious, the next resync of live state).
func (l *loop) schedule(st *appState, obs rules.AppObservation, now time.Time) {
	next := rules.NextDeadline(obs, now, l.w.o.Thresholds)
	if !st.liveAt.IsZero() && (st.retry || rules.NeedsLive(st.app, st.finalizerSeen, now, l.w.o.Thresholds) == rules.LiveNow) {
		if r := st.liveAt.Add(l.w.o.Resync); next.IsZero() || r.Before(next) {
			next = r
		}
	}
	if st.timer != nil {
		st.timer.Stop()
	}
	st.timerGen++
	if next.IsZero() {
		st.timer = nil
		return
	}
	key, gen, ctx := st.subject, st.timerGen, l.ctx
	st.timer = time.AfterFunc(max(next.Sub(now), 0), func() { l.w.send(ctx, input{kind: inTimer, key: key, gen: gen}) })
}

func (l *loop) stopTimers() {
	for _, st := range l.apps {
		if st.timer != nil {
			st.timer.Stop()
		}
	}
}
