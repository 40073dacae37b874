package argo

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/internal/argoapi/applicationset"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// appSetReports records what an AppSetPoller reports: how often each subject was observed, and the subjects
// reported gone.
type appSetReports struct {
	mu       sync.Mutex
	observed map[string]int
	gone     []string
}

func (r *appSetReports) Observe(_ context.Context, subject string, _ []syncmedic.Finding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observed[subject]++
}

func (r *appSetReports) Gone(_ context.Context, subject string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gone = append(r.gone, subject)
}

// counts returns how often subject was observed and each time it was reported gone (other ApplicationSets of the
// shared stack come and go with other tests).
func (r *appSetReports) counts(subject string) (observed int, gone []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.gone {
		if s == subject {
			gone = append(gone, s)
		}
	}
	return r.observed[subject], gone
}

// argocd-server's ApplicationSet List silently leaves out the ApplicationSets the account may not get
// (server/applicationset List filters by `applicationsets, get`, v2.14.21 to v3.6.1), with a resourceVersion as if
// it were complete. The poller behind argocd/rollingsync-stalled must not report one gone, which resolves its
// incident, because a person took that line away from syncmedic's account in argocd-rbac-cm: it asks CanI, keeps
// the ApplicationSet and says which line to add; once the line is back the ApplicationSet is read again; and one
// really deleted is reported gone. Before the fix the poller reported it gone at the first poll without it.
func TestAnApplicationSetHiddenByArgoCDRBACIsNotReportedGone(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version, func(t *testing.T) {
			t.Parallel()
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			account, grant, token := grantedAccount(t, stack, "appsets", "applicationsets")

			as := &v1alpha1.ApplicationSet{
				ObjectMeta: metav1.ObjectMeta{Name: account, Namespace: stack.Namespace},
				Spec: v1alpha1.ApplicationSetSpec{
					Generators: []v1alpha1.ApplicationSetGenerator{{List: &v1alpha1.ListGenerator{}}}, // generates nothing
					Template: v1alpha1.ApplicationSetTemplate{
						ApplicationSetTemplateMeta: v1alpha1.ApplicationSetTemplateMeta{Name: account + "-{{name}}"},
						Spec: v1alpha1.ApplicationSpec{
							Project:     v1alpha1.DefaultAppProjectName,
							Source:      &v1alpha1.ApplicationSource{RepoURL: "https://example.invalid/shop.git", Path: ".", TargetRevision: "main"},
							Destination: v1alpha1.ApplicationDestination{Server: v1alpha1.KubernetesInternalAPIServerAddr, Namespace: "shop"},
						},
					},
				},
			}
			ctx := context.Background()
			require.NoError(t, env.Client.Create(ctx, as))
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), as) }) // the stack outlives the test
			subject := argocd.AppSetSubject("", stack.Namespace, as.Name)

			tokenFile := filepath.Join(t.TempDir(), "argocd-token")
			require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
			c, err := argocd.Dial(argocd.ClientOptions{ServerAddr: stack.Addr, PlainText: true, TokenFile: tokenFile})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			logs := &testenv.LockedBuffer{}
			p := argocd.NewAppSetPoller(argocd.AppSetPollerOptions{Client: c, Log: slog.New(slog.NewTextHandler(logs, nil))})
			rec := &appSetReports{observed: map[string]int{}}
			poll := func() { require.NoError(t, p.Poll(ctx, rec)) }
			require.True(t, waitFor(30*time.Second, func() bool {
				poll()
				n, _ := rec.counts(subject)
				return n > 0
			}), "the poller reads the ApplicationSet")

			stack.SetAccountPolicy(t, account) // the account's lines removed from argocd-rbac-cm
			// What argocd-server does then: its list leaves the ApplicationSet out with a resourceVersion, as a
			// complete list has.
			var list *v1alpha1.ApplicationSetList
			require.True(t, waitFor(30*time.Second, func() bool {
				list, err = c.ListApplicationSets(ctx, &applicationset.ApplicationSetListQuery{})
				return err == nil && !listsAppSet(list, as.Name)
			}), "argocd-server hides the ApplicationSet once the line is gone (last error: %v)", err)
			require.NotEmpty(t, list.ResourceVersion, "argocd-server's list looks complete")
			before, _ := rec.counts(subject)
			for range 3 {
				poll()
			}
			after, gone := rec.counts(subject)
			require.Empty(t, gone, "an ApplicationSet hidden by RBAC is not reported gone")
			require.Equal(t, before, after, "nor evaluated while hidden")
			require.Contains(t, logs.String(), "argocd account may not get every applicationset")
			require.Contains(t, logs.String(), "p, role:syncmedic, applicationsets, get, */*, allow")

			stack.SetAccountPolicy(t, account, grant...)
			// Read again once the line is back; the poll whose CanI says yes before and after its list logs it. (A
			// poll may list it again while its CanI before the list still said no: that one is partial.)
			require.True(t, waitFor(30*time.Second, func() bool {
				poll()
				n, _ := rec.counts(subject)
				return n > after && strings.Contains(logs.String(), "argocd applicationsets readable again")
			}), "read again once the line is back: %s", logs.String())
			_, gone = rec.counts(subject)
			require.Empty(t, gone)

			// The near miss: an ApplicationSet really deleted is reported gone, once.
			require.NoError(t, env.Client.Delete(ctx, as))
			require.True(t, waitFor(30*time.Second, func() bool {
				poll()
				_, gone := rec.counts(subject)
				return len(gone) > 0
			}), "a deleted ApplicationSet is reported gone")
			_, gone = rec.counts(subject)
			require.Equal(t, []string{subject}, gone)
		})
	}
}

// listsAppSet reports whether list holds the ApplicationSet name.
func listsAppSet(list *v1alpha1.ApplicationSetList, name string) bool {
	for _, as := range list.Items {
		if as.Name == name {
			return true
		}
	}
	return false
}
