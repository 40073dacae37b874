package argocd

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	versionpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/version"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// fakeArgo stands in for argocd-server in unit tests of the watcher's logic: it reports a version, lists apps, keeps
// the watch open without events, and counts ResourceTree calls (optionally holding each until release is closed).
// Calls the watcher must not make are left to the nil embedded Client and would panic.
type fakeArgo struct {
	Client
	version    string
	versionErr error
	apps       []v1alpha1.Application
	trees      atomic.Int64
	entered    chan struct{} // receives one value per ResourceTree call, when non-nil
	release    chan struct{} // ResourceTree waits for it to close, when non-nil
}

func (f *fakeArgo) Version(context.Context, *emptypb.Empty, ...grpc.CallOption) (*versionpkg.VersionMessage, error) {
	if f.versionErr != nil {
		return nil, f.versionErr
	}
	return &versionpkg.VersionMessage{Version: f.version}, nil
}

func (f *fakeArgo) Watch(ctx context.Context, _ *application.ApplicationQuery, _ ...grpc.CallOption) (application.ApplicationService_WatchClient, error) {
	return idleStream{ctx: ctx}, nil
}

func (f *fakeArgo) List(context.Context, *application.ApplicationQuery, ...grpc.CallOption) (*v1alpha1.ApplicationList, error) {
	l := &v1alpha1.ApplicationList{Items: f.apps}
	l.ResourceVersion = "1000" // argocd-server's informer's last resourceVersion, once it has synced
	return l, nil
}

func (f *fakeArgo) ResourceTree(ctx context.Context, _ *application.ResourcesQuery, _ ...grpc.CallOption) (*v1alpha1.ApplicationTree, error) {
	f.trees.Add(1)
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &v1alpha1.ApplicationTree{}, nil // the hooks are gone: nothing to GetResource
}

// idleStream is a watch that sends nothing until its context ends.
type idleStream struct {
	grpc.ClientStream
	ctx context.Context
}

func (s idleStream) Recv() (*v1alpha1.ApplicationWatchEvent, error) {
	<-s.ctx.Done()
	return nil, s.ctx.Err()
}

// reports is a Sink that hands every report to a channel.
type reports chan []syncmedic.Finding

func (r reports) Observe(_ context.Context, _ string, fs []syncmedic.Finding) { r <- fs }

// hookedHealthy is an application whose last sync ran a PreSync hook and succeeded an hour before now.
func hookedHealthy() v1alpha1.Application {
	op := runningOp(2*time.Hour, "successfully synced (all tasks run)", synccommon.OperationSucceeded)
	op.Phase, op.FinishedAt = synccommon.OperationSucceeded, ago(time.Hour)
	a := app(op)
	a.ResourceVersion = "100"
	return *a
}

func TestHookLeakCheckFollowsTheServerVersion(t *testing.T) {
	tests := []struct {
		name       string
		version    string
		versionErr error
		check      rules.HookLeakCheck
		reads      int64
	}{
		{"a healthy application whose sync ran hooks costs no call on a v2.14.21 server", "v2.14.21+7ed2f2b", nil, "", 0},
		{"it costs no call on a v2.13 server either", "v2.13.5", nil, rules.HookLeakAuto, 0},
		{"it gets one look on v2.14.3, the only 2.x release that adds the finalizer", "v2.14.3+71fd4e5", nil, rules.HookLeakAuto, 1},
		{"it gets one look on a v3 server", "v3.1.2+abc1234", nil, rules.HookLeakAuto, 1},
		{"it gets one look when the Version API fails", "", status.Error(codes.Unavailable, "no version"), rules.HookLeakAuto, 1},
		{"it gets one look when the version cannot be parsed", "devel", nil, rules.HookLeakAuto, 1},
		{"always looks on a v2.14.21 server", "v2.14.21", nil, rules.HookLeakAlways, 1},
		{"never looks on a v3 server", "v3.0.0", nil, rules.HookLeakNever, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeArgo{version: tt.version, versionErr: tt.versionErr, apps: []v1alpha1.Application{hookedHealthy()}}
			w, err := NewWatcher(WatcherOptions{Client: fake, HookLeakCheck: tt.check, Now: func() time.Time { return now }})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			sink, done := make(reports, 16), make(chan error, 1)
			go func() { done <- w.Run(ctx, sink) }()
			select {
			case fs := <-sink:
				require.Empty(t, fs, "the hooks are gone: nothing to report")
			case <-time.After(10 * time.Second):
				t.Fatal("the application was never evaluated")
			}
			cancel()
			require.NoError(t, <-done)
			require.Equal(t, tt.reads, fake.trees.Load(), "ResourceTree calls")
			require.Equal(t, tt.reads, w.Stats().Calls, "live-state calls counted by the watcher")
		})
	}
	t.Run("an unknown setting is refused", func(t *testing.T) {
		_, err := NewWatcher(WatcherOptions{Client: &fakeArgo{}, HookLeakCheck: "sometimes"})
		require.ErrorContains(t, err, "want auto, always or never")
	})
}

// loopHarness drives a watcher's loop by hand: inputs are handled in the test's goroutine, so a read can be held
// in flight while updates arrive.
type loopHarness struct {
	l    *loop
	fake *fakeArgo
	sink reports
}

func newLoopHarness(t *testing.T, version string) *loopHarness {
	fake := &fakeArgo{version: version, entered: make(chan struct{}, 16), release: make(chan struct{})}
	w, err := NewWatcher(WatcherOptions{Client: fake, Now: func() time.Time { return now }})
	require.NoError(t, err)
	w.version.Store(version)
	ctx, cancel := context.WithCancel(context.Background())
	h := &loopHarness{fake: fake, sink: make(reports, 64)}
	h.l = &loop{w: w, ctx: ctx, sink: h.sink, apps: map[string]*appState{}}
	t.Cleanup(func() { cancel(); h.l.stopTimers() })
	return h
}

// update delivers a new version of a (a refresh: only the resourceVersion and reconciledAt move) unless op is set.
func (h *loopHarness) update(a v1alpha1.Application, rv int, op *v1alpha1.OperationState) {
	a.ResourceVersion = strconv.Itoa(rv)
	a.Status.ReconciledAt = ago(-time.Duration(rv) * time.Second)
	if op != nil {
		a.Status.OperationState = op
	}
	h.l.handle(input{kind: inEvent, ev: watch.Modified, app: &a})
}

// finish lets every held read return and handles inputs until no read is running; it returns the reports made.
func (h *loopHarness) finish(t *testing.T) int {
	t.Helper()
	close(h.fake.release)
	for {
		st := h.l.apps[Subject("", "argocd", "shop")]
		if !st.fetching {
			break
		}
		select {
		case in := <-h.l.w.in:
			h.l.handle(in)
		case <-time.After(10 * time.Second):
			t.Fatal("a read never returned")
		}
	}
	return len(h.sink)
}

func TestOneReadPerOperationDespiteConcurrentUpdates(t *testing.T) {
	stuck := *app(runningOp(time.Hour, "waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning))
	stuck.ResourceVersion = "100"
	tests := []struct {
		name    string
		app     v1alpha1.Application
		version string
	}{
		{"a stuck application is read once while refreshes arrive during the read", stuck, "v2.14.21"},
		{"a healthy application whose sync ran hooks is read once on a v3 server while refreshes arrive", hookedHealthy(), "v3.0.4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newLoopHarness(t, tt.version)
			h.l.handle(input{kind: inListed, apps: []v1alpha1.Application{tt.app}})
			<-h.fake.entered
			for rv := 101; rv <= 105; rv++ {
				h.update(tt.app, rv, nil)
			}
			require.Equal(t, 1, h.finish(t), "one report, once the read returned")
			require.Equal(t, int64(1), h.fake.trees.Load(), "one ResourceTree")
			require.Equal(t, "105", h.l.apps[Subject("", "argocd", "shop")].app.ResourceVersion, "the report is about the latest version")
		})
	}

	t.Run("a new operation during a read is read once more when the first read returns", func(t *testing.T) {
		h := newLoopHarness(t, "v2.14.21")
		h.l.handle(input{kind: inListed, apps: []v1alpha1.Application{stuck}})
		<-h.fake.entered
		moved := runningOp(time.Hour, "waiting for completion of hook batch/Job/seed", synccommon.OperationRunning)
		h.update(stuck, 101, moved)
		h.update(stuck, 102, moved)
		h.finish(t)
		require.Equal(t, int64(2), h.fake.trees.Load())
	})
	t.Run("a trigger during a read is served by one more read", func(t *testing.T) {
		h := newLoopHarness(t, "v2.14.21")
		h.l.handle(input{kind: inListed, apps: []v1alpha1.Application{stuck}})
		<-h.fake.entered
		h.l.handle(input{kind: inTrigger, key: Subject("", "argocd", "shop")})
		h.update(stuck, 101, nil)
		h.finish(t)
		require.Equal(t, int64(2), h.fake.trees.Load())
	})
}

// goneSink records the subjects reported gone besides the findings.
type goneSink struct {
	reports
	gone []string
}

func (g *goneSink) Gone(_ context.Context, subject string) { g.gone = append(g.gone, subject) }

// argocd-server leaves out of List every application the account may not get, and every one its informer has not
// read yet: such a list says nothing about the applications it leaves out, which stay as they were (their incidents
// open, unevaluated) until a complete list or a DELETED event; a complete list still removes what it leaves out.
func TestAListLeavingOutApplicationsOnlyRemovesThemWhenComplete(t *testing.T) {
	stuck := *app(runningOp(time.Hour, "waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning))
	stuck.ResourceVersion = "100"
	other := hookedHealthy()
	other.Name, other.ResourceVersion = "other", "50"
	key := Subject("", "argocd", "shop")
	// settle handles the loop's inputs until no read runs.
	settle := func(t *testing.T, l *loop) {
		for {
			busy := false
			for _, st := range l.apps {
				busy = busy || st.fetching
			}
			if !busy {
				return
			}
			select {
			case in := <-l.w.in:
				l.handle(in)
			case <-time.After(10 * time.Second):
				t.Fatal("a read never returned")
			}
		}
	}
	newLoop := func(t *testing.T) (*loop, *goneSink) {
		h := newLoopHarness(t, "v3.6.1")
		h.fake.entered = nil
		close(h.fake.release)
		sink := &goneSink{reports: h.sink}
		h.l.sink = sink
		h.l.handle(input{kind: inListed, apps: []v1alpha1.Application{stuck, other}})
		settle(t, h.l)
		return h.l, sink
	}
	for _, why := range []string{"the account may not get every watched application (argocd-rbac-cm)",
		"argocd-server has not finished reading the applications (its list has no resourceVersion)"} {
		t.Run("kept when "+why, func(t *testing.T) {
			l, sink := newLoop(t)
			l.handle(input{kind: inListed, apps: []v1alpha1.Application{other}, partial: why})
			require.Empty(t, sink.gone, "nothing reported gone")
			st := l.apps[key]
			require.NotNil(t, st, "still watched")
			require.True(t, st.unseen)
			reads := l.w.o.Client.(*fakeArgo).trees.Load()
			l.handle(input{kind: inTrigger, key: key})
			l.handle(input{kind: inTimer, key: key, gen: st.timerGen})
			require.False(t, st.fetching, "not evaluated while unseen: nothing about it can be read")

			l.handle(input{kind: inListed, apps: []v1alpha1.Application{stuck, other}})
			require.False(t, st.unseen, "seen again by the next complete list")
			settle(t, l)
			require.Equal(t, reads+1, l.w.o.Client.(*fakeArgo).trees.Load(), "and evaluated again at once, its hooks read afresh")
			require.Empty(t, sink.gone)
		})
	}
	t.Run("removed by a complete list", func(t *testing.T) {
		l, sink := newLoop(t)
		l.handle(input{kind: inListed, apps: []v1alpha1.Application{other}})
		require.Equal(t, []string{key}, sink.gone)
		require.Nil(t, l.apps[key])
	})
	t.Run("removed by a DELETED event while unseen", func(t *testing.T) {
		l, sink := newLoop(t)
		l.handle(input{kind: inListed, apps: []v1alpha1.Application{other}, partial: "the account may not get every watched application (argocd-rbac-cm)"})
		deleted := stuck
		l.handle(input{kind: inEvent, ev: watch.Deleted, app: &deleted})
		require.Equal(t, []string{key}, sink.gone)
	})
	t.Run("a read answered after the application became unseen is not reported", func(t *testing.T) {
		h := newLoopHarness(t, "v3.6.1")
		h.l.handle(input{kind: inListed, apps: []v1alpha1.Application{stuck}})
		<-h.fake.entered
		n := len(h.sink)
		h.l.handle(input{kind: inListed, apps: nil, partial: "the account may not get every watched application (argocd-rbac-cm)"})
		close(h.fake.release)
		h.l.handle(<-h.l.w.in)
		require.Len(t, h.sink, n, "no evaluation from a read of an application nothing can see now")
		require.False(t, h.l.apps[key].fetching)
	})
}
