package argocd

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	accountpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/account"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// cani answers CanI from a table "action object" (for other resources than applications: "resource action object")
// → answer ("yes", "no", or an error), for unit tests of the message and permission logic; the end-to-end tests ask
// the real argocd-server.
type cani struct {
	mu      sync.Mutex
	answers map[string]any
	asked   []string
}

func (c *cani) set(key string, answer any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers[key] = answer
}

func (c *cani) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.asked)
}

func (c *cani) CanI(_ context.Context, in *accountpkg.CanIRequest, _ ...grpc.CallOption) (*accountpkg.CanIResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := in.Action + " " + in.Subresource
	if in.Resource != ResourceApplications {
		key = in.Resource + " " + key // "applicationsets get */*"
	}
	c.asked = append(c.asked, key)
	switch a := c.answers[key].(type) {
	case error:
		return nil, a
	case string:
		return &accountpkg.CanIResponse{Value: a}, nil
	}
	return &accountpkg.CanIResponse{Value: "no"}, nil
}

func TestWatchScope(t *testing.T) {
	tests := []struct {
		name         string
		projects     []string
		appNamespace string
		want         []string
	}{
		{"no project asks for every application", nil, "", []string{"*/*"}},
		{"each project asks for its applications", []string{"shop", "infra"}, "", []string{"shop/*", "infra/*"}},
		{"an app namespace is the middle part of the object", []string{"shop"}, "apps", []string{"shop/apps/*"}},
		{"an app namespace without project asks for every project there", nil, "apps", []string{"*/apps/*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, WatchScope(tt.projects, tt.appNamespace))
		})
	}
}

func TestAccessErrorMessage(t *testing.T) {
	t.Run("one missing permission names it and the exact policy line", func(t *testing.T) {
		msg := (&AccessError{Missing: []Permission{{Action: ActionGet, Object: "*/*"}}}).Error()
		require.Contains(t, msg, "lacks the RBAC permission `applications, get, */*`")
		require.Contains(t, msg, "`p, role:syncmedic, applications, get, */*, allow`")
		require.Contains(t, msg, "`g, <account>, role:syncmedic`")
		require.Contains(t, msg, "silently leaves the applications an account may not get out of Watch and List")
		require.Contains(t, msg, "--argocd-project")
	})
	t.Run("several projects are each named with their own line", func(t *testing.T) {
		msg := (&AccessError{Missing: []Permission{{Action: ActionGet, Object: "shop/*"}, {Action: ActionGet, Object: "infra/*"}}}).Error()
		require.Contains(t, msg, "`applications, get, shop/*` and `applications, get, infra/*`")
		require.Contains(t, msg, "`p, role:syncmedic, applications, get, shop/*, allow` and `p, role:syncmedic, applications, get, infra/*, allow`")
	})
}

func TestCheckWatch(t *testing.T) {
	t.Run("an account that may get every watched application passes", func(t *testing.T) {
		c := &cani{answers: map[string]any{"get shop/*": "yes", "get infra/*": "yes"}}
		require.NoError(t, CheckWatch(context.Background(), c, []string{"shop/*", "infra/*"}))
		require.Equal(t, []string{"get shop/*", "get infra/*"}, c.asked)
	})
	t.Run("a refused project is a permanent access error naming only that project", func(t *testing.T) {
		c := &cani{answers: map[string]any{"get shop/*": "yes"}}
		err := CheckWatch(context.Background(), c, []string{"shop/*", "infra/*"})
		require.True(t, syncmedic.IsPermanent(err))
		require.True(t, IsAccessDenied(err))
		var ae *AccessError
		require.True(t, errors.As(err, &ae))
		require.Equal(t, []Permission{{Action: ActionGet, Object: "infra/*"}}, ae.Missing)
	})
	t.Run("a refused token is permanent but not an access error", func(t *testing.T) {
		c := &cani{answers: map[string]any{"get */*": status.Error(codes.Unauthenticated, "invalid session")}}
		err := CheckWatch(context.Background(), c, []string{"*/*"})
		require.True(t, syncmedic.IsPermanent(err))
		require.False(t, IsAccessDenied(err))
		require.ErrorContains(t, err, "token")
	})
	t.Run("an unreachable server is neither", func(t *testing.T) {
		c := &cani{answers: map[string]any{"get */*": status.Error(codes.Unavailable, "connection refused")}}
		err := CheckWatch(context.Background(), c, []string{"*/*"})
		require.Error(t, err)
		require.False(t, syncmedic.IsPermanent(err))
	})
}

func TestWatcherReadyFollowsThePreflight(t *testing.T) {
	access := &cani{answers: map[string]any{}}
	logs := &testenv.LockedBuffer{}
	w, err := NewWatcher(WatcherOptions{Client: &fakeArgo{version: "v2.14.21"}, Access: access, AccessRecheck: 10 * time.Millisecond,
		MinBackoff: time.Millisecond, Projects: []string{"shop"}, Log: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, make(reports, 1024)) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	t.Run("an account that may not get the project is not ready, and says which line to add", func(t *testing.T) {
		require.Eventually(t, func() bool { return IsAccessDenied(w.Ready()) }, 10*time.Second, 5*time.Millisecond)
		require.ErrorContains(t, w.Ready(), "`p, role:syncmedic, applications, get, shop/*, allow`")
		require.Eventually(t, func() bool { return access.count() >= 3 }, 10*time.Second, 5*time.Millisecond, "asked again while refused")
		require.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), "the refusal is logged once: %s", logs.String())
		require.Contains(t, logs.String(), "applications, get, shop/*")
	})
	t.Run("once granted, the watcher re-lists and is ready", func(t *testing.T) {
		access.set("get shop/*", "yes")
		require.Eventually(t, func() bool { return w.Ready() == nil }, 10*time.Second, 5*time.Millisecond)
		require.GreaterOrEqual(t, w.Stats().Reconnects, int64(1), "the stream was re-opened to list what it could not see")
	})
}

// A list is complete only when CanI says yes on both sides of it: the preflight before, listPartial after.
func TestAListIsCompleteOnlyBetweenTwoYeses(t *testing.T) {
	access := &cani{answers: map[string]any{"get shop/*": "yes"}}
	w, err := NewWatcher(WatcherOptions{Client: &fakeArgo{version: "v2.14.21"}, Access: access, Projects: []string{"shop"},
		Log: slog.New(slog.NewTextHandler(&testenv.LockedBuffer{}, nil))})
	require.NoError(t, err)
	ctx := context.Background()
	synced := &v1alpha1.ApplicationList{}
	synced.ResourceVersion = "1000"

	require.Empty(t, w.listPartial(ctx, synced), "yes after the list (and no refusal before it): complete")
	require.Equal(t, []string{"get shop/*"}, access.asked, "CanI asked again after the list, on the watch's scope")

	access.set("get shop/*", "no") // the line was removed while the list was read
	require.Contains(t, w.listPartial(ctx, synced), "changed, or could not be checked, after the list")

	access.set("get shop/*", status.Error(codes.Unavailable, "connection refused"))
	require.Contains(t, w.listPartial(ctx, synced), "changed, or could not be checked, after the list", "no answer proves nothing")

	access.set("get shop/*", "yes")
	require.Contains(t, w.listPartial(ctx, &v1alpha1.ApplicationList{}), "has not finished reading", "no resourceVersion")
	w.setDenied(&AccessError{Missing: []Permission{{Action: ActionGet, Object: "shop/*"}}}) // the preflight said no
	require.Contains(t, w.listPartial(ctx, synced), "may not get every watched application", "a yes after a no before proves nothing")

	unchecked, err := NewWatcher(WatcherOptions{Client: &fakeArgo{version: "v2.14.21"}})
	require.NoError(t, err)
	require.Empty(t, unchecked.listPartial(ctx, synced), "without a CanI client the list is taken as complete, as the preflight does")
}
