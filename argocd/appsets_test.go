package argocd

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/applicationset"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// fakeAppSets is an Argo CD with ApplicationSets: it lists sets (or fails with err) and counts the Applications
// read one by one.
type fakeAppSets struct {
	fakeArgo
	sets []v1alpha1.ApplicationSet
	err  error
	// onList runs as each list is answered (an RBAC change while the list is read).
	onList func()
	byName map[string]*v1alpha1.Application
	gets   []string
	// unsynced: answer as an argocd-server that has not read the ApplicationSets yet (no resourceVersion).
	unsynced bool
}

func (f *fakeAppSets) ListApplicationSets(context.Context, *applicationset.ApplicationSetListQuery, ...grpc.CallOption) (*v1alpha1.ApplicationSetList, error) {
	if f.err != nil {
		return nil, f.err
	}
	l := &v1alpha1.ApplicationSetList{Items: f.sets}
	if f.onList != nil {
		f.onList()
	}
	if !f.unsynced {
		l.ResourceVersion = "1000" // argocd-server's informer's last resourceVersion, once it has synced
	}
	return l, nil
}

func (f *fakeAppSets) Get(_ context.Context, q *application.ApplicationQuery, _ ...grpc.CallOption) (*v1alpha1.Application, error) {
	f.gets = append(f.gets, q.GetName())
	if a, ok := f.byName[q.GetName()]; ok {
		return a.DeepCopy(), nil
	}
	return nil, status.Error(codes.NotFound, "application not found")
}

// stalledArgo serves rollout()'s ApplicationSet and Applications.
func stalledArgo() *fakeAppSets {
	o := rollout()
	f := &fakeAppSets{sets: []v1alpha1.ApplicationSet{*o.AppSet}, byName: o.Apps}
	f.version = "v2.14.21"
	for _, a := range o.Apps {
		f.apps = append(f.apps, *a)
	}
	return f
}

func TestScanReadsApplicationSets(t *testing.T) {
	t.Run("a stalled rollout is reported from the listed ApplicationSet and applications, with no extra read", func(t *testing.T) {
		f := stalledArgo()
		var read string
		fs, problems, err := Scan(context.Background(), ScanOptions{Client: f, Access: allowAll{}, Read: &read}, now)
		require.NoError(t, err)
		require.Empty(t, problems)
		require.Equal(t, []syncmedic.RuleID{syncmedic.RuleRollingSyncStalled}, ruleIDs(fs))
		require.Equal(t, "ApplicationSet", fs[0].Object.Kind)
		require.Equal(t, "shop", fs[0].Object.Name)
		require.Empty(t, f.gets)
		require.Equal(t, "3 applications, 1 ApplicationSets", read)
	})
	t.Run("a holder the application list left out (a selector) is read with Get", func(t *testing.T) {
		f := stalledArgo()
		f.apps = nil
		fs, _, err := Scan(context.Background(), ScanOptions{Client: f, Access: allowAll{}}, now)
		require.NoError(t, err)
		require.Equal(t, []syncmedic.RuleID{syncmedic.RuleRollingSyncStalled}, ruleIDs(fs))
		require.Equal(t, []string{"shop-us"}, f.gets, "only the possible holder is read")
	})
	t.Run("an account that may not get every ApplicationSet is a problem naming the policy line, and the read says so", func(t *testing.T) {
		f := stalledArgo()
		access := &cani{answers: map[string]any{"get */*": "yes", "applicationsets get */*": "no"}}
		var read string
		fs, problems, err := Scan(context.Background(), ScanOptions{Client: f, Access: access, Read: &read}, now)
		require.NoError(t, err)
		require.Equal(t, []syncmedic.RuleID{syncmedic.RuleRollingSyncStalled}, ruleIDs(fs), "what it may read is still judged")
		require.Len(t, problems, 1)
		require.Contains(t, problems[0], "lacks [applicationsets, get, */*]")
		require.Contains(t, problems[0], "`p, role:syncmedic, applicationsets, get, */*, allow`")
		require.Equal(t, "3 applications, 1 ApplicationSets (others may be hidden by Argo CD RBAC)", read)
	})
	t.Run("ApplicationSets that cannot be listed are a problem named in the report, not a failed scan", func(t *testing.T) {
		f := stalledArgo()
		f.err = status.Error(codes.Unimplemented, "unknown service applicationset.ApplicationSetService")
		var read string
		fs, problems, err := Scan(context.Background(), ScanOptions{Client: f, Access: allowAll{}, Read: &read}, now)
		require.NoError(t, err)
		require.Empty(t, fs)
		require.Len(t, problems, 1)
		require.Contains(t, problems[0], "argocd/rollingsync-stalled skipped")
		require.Equal(t, "3 applications, ApplicationSets unreadable", read)
	})
}

// subjectReports is a GoneSink that records the last findings and the gone subjects.
type subjectReports struct {
	last map[string][]syncmedic.Finding
	gone []string
}

func (s *subjectReports) Observe(_ context.Context, subject string, fs []syncmedic.Finding) {
	s.last[subject] = fs
}

func (s *subjectReports) Gone(_ context.Context, subject string) { s.gone = append(s.gone, subject) }

func TestAppSetPoller(t *testing.T) {
	subject := AppSetSubject("", "argocd", "shop")
	t.Run("each ApplicationSet is reported under its subject; only the possible holder is read", func(t *testing.T) {
		f := stalledArgo()
		p := NewAppSetPoller(AppSetPollerOptions{Client: f, Now: func() time.Time { return now }})
		sink := &subjectReports{last: map[string][]syncmedic.Finding{}}
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Equal(t, []syncmedic.RuleID{syncmedic.RuleRollingSyncStalled}, ruleIDs(sink.last[subject]))
		require.Equal(t, []string{"shop-us"}, f.gets)
	})
	t.Run("near miss: a rollout within its threshold is evaluated (reported with no finding) and reads no application", func(t *testing.T) {
		f := stalledArgo()
		f.sets[0].Status.ApplicationStatus[1].LastTransitionTime = ago(time.Minute)
		p := NewAppSetPoller(AppSetPollerOptions{Client: f, Now: func() time.Time { return now }})
		sink := &subjectReports{last: map[string][]syncmedic.Finding{}}
		require.NoError(t, p.Poll(context.Background(), sink))
		fs, evaluated := sink.last[subject]
		require.True(t, evaluated, "the ApplicationSet was looked at")
		require.Empty(t, fs)
		require.Empty(t, f.gets)
	})
	t.Run("an ApplicationSet no longer listed is reported gone", func(t *testing.T) {
		f := stalledArgo()
		p := NewAppSetPoller(AppSetPollerOptions{Client: f, Now: func() time.Time { return now }})
		sink := &subjectReports{last: map[string][]syncmedic.Finding{}}
		require.NoError(t, p.Poll(context.Background(), sink))
		f.sets = nil
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Equal(t, []string{subject}, sink.gone)
	})
	t.Run("an ApplicationSet left out by an argocd-server that has not read them all yet is kept", func(t *testing.T) {
		f := stalledArgo()
		p := NewAppSetPoller(AppSetPollerOptions{Client: f, Now: func() time.Time { return now }})
		sink := &subjectReports{last: map[string][]syncmedic.Finding{}}
		require.NoError(t, p.Poll(context.Background(), sink))
		f.sets, f.unsynced = nil, true // just started: its list has no resourceVersion
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Empty(t, sink.gone, "not reported gone")
		f.unsynced = false
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Equal(t, []string{subject}, sink.gone, "a complete list without it does")
	})
	t.Run("an ApplicationSet left out while the account may not get every ApplicationSet is kept", func(t *testing.T) {
		f := stalledArgo()
		access := &cani{answers: map[string]any{"applicationsets get */*": "yes"}}
		var logs bytes.Buffer
		p := NewAppSetPoller(AppSetPollerOptions{Client: f, Access: access, Now: func() time.Time { return now },
			Log: slog.New(slog.NewTextHandler(&logs, nil))})
		sink := &subjectReports{last: map[string][]syncmedic.Finding{}}
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Equal(t, []syncmedic.RuleID{syncmedic.RuleRollingSyncStalled}, ruleIDs(sink.last[subject]))
		// RBAC now hides it: argocd-server's list leaves it out, complete as far as its informer goes.
		access.set("applicationsets get */*", "no")
		f.sets = nil
		require.NoError(t, p.Poll(context.Background(), sink))
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Empty(t, sink.gone, "not reported gone while the account may not get it")
		require.Equal(t, 1, strings.Count(logs.String(), "argocd account may not get every applicationset"), "logged once: %s", logs.String())
		require.Contains(t, logs.String(), "p, role:syncmedic, applicationsets, get, */*, allow")
		// A CanI that cannot be asked proves nothing either.
		access.set("applicationsets get */*", status.Error(codes.Unavailable, "connection refused"))
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Empty(t, sink.gone, "not reported gone while CanI cannot answer")
		access.set("applicationsets get */*", "yes")
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Equal(t, []string{subject}, sink.gone, "once the account may get every ApplicationSet, a list without it is proof")
		require.Contains(t, logs.String(), "argocd applicationsets readable again")
		require.Equal(t, []string{"applicationsets get */*"}, slices.Compact(access.asked), "only applicationsets, get is asked, on the watch's scope")
	})
	t.Run("an RBAC change while the list is read makes it partial, either way", func(t *testing.T) {
		f := stalledArgo()
		access := &cani{answers: map[string]any{"applicationsets get */*": "yes"}}
		p := NewAppSetPoller(AppSetPollerOptions{Client: f, Access: access, Now: func() time.Time { return now }})
		sink := &subjectReports{last: map[string][]syncmedic.Finding{}}
		require.NoError(t, p.Poll(context.Background(), sink))
		// The line is removed just as argocd-server answers a list that already leaves the ApplicationSet out.
		f.sets = nil
		f.onList = func() { access.set("applicationsets get */*", "no") }
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Empty(t, sink.gone, "a yes before the list alone proves nothing")
		// The line comes back while argocd-server answers a list still filtered without it.
		f.onList = func() { access.set("applicationsets get */*", "yes") }
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Empty(t, sink.gone, "a yes after the list alone proves nothing")
		f.onList = nil
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Equal(t, []string{subject}, sink.gone, "a list between two yeses is proof")
	})
	t.Run("the CanI is asked on the poller's projects and namespace", func(t *testing.T) {
		f := stalledArgo()
		access := &cani{answers: map[string]any{"applicationsets get shop/apps/*": "yes", "applicationsets get web/apps/*": "no"}}
		p := NewAppSetPoller(AppSetPollerOptions{Client: f, Access: access, Projects: []string{"shop", "web"}, Namespace: "apps", Now: func() time.Time { return now }})
		sink := &subjectReports{last: map[string][]syncmedic.Finding{}}
		require.NoError(t, p.Poll(context.Background(), sink))
		f.sets = nil
		require.NoError(t, p.Poll(context.Background(), sink))
		require.Empty(t, sink.gone, "web's ApplicationSets may be hidden")
		require.Equal(t, []string{"applicationsets get shop/apps/*", "applicationsets get web/apps/*"}, access.asked[:2])
	})
	t.Run("a failed list changes nothing reported and is returned", func(t *testing.T) {
		f := stalledArgo()
		f.err = status.Error(codes.Unavailable, "connection refused")
		p := NewAppSetPoller(AppSetPollerOptions{Client: f, Now: func() time.Time { return now }})
		sink := &subjectReports{last: map[string][]syncmedic.Finding{}}
		err := p.Poll(context.Background(), sink)
		require.Error(t, err)
		require.False(t, syncmedic.IsPermanent(err))
		require.Empty(t, sink.last)
		require.False(t, errors.Is(err, context.Canceled))
	})
}
