package argocd_test

import (
	"context"
	"log/slog"
	"slices"
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

// appSetReports records what an AppSetPoller reports: the subjects observed and the ones reported gone.
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

func (r *appSetReports) counts(subject string) (observed int, gone []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.observed[subject], slices.Clone(r.gone)
}

// TestAppSetPollerKeepsWhatArgoCDRBACHides: the real argocd-server's ApplicationSet List silently leaves out the
// ApplicationSets the account may not get, with a resourceVersion as if complete. An ApplicationSet the poller
// reported must not be reported gone (its incident resolved) because a person took `applicationsets, get` away from
// syncmedic's account; once the line is back it is read again, and deleting it is reported gone.
func TestAppSetPollerKeepsWhatArgoCDRBACHides(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	grant := []string{"p, role:appset-reader, applicationsets, get, */*, allow", "g, appset-reader, role:appset-reader"}
	token := argo.AddAccount(t, "appset-reader", grant...)

	as := &v1alpha1.ApplicationSet{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: argo.Namespace},
		Spec: v1alpha1.ApplicationSetSpec{
			Generators: []v1alpha1.ApplicationSetGenerator{{List: &v1alpha1.ListGenerator{}}},
			Template: v1alpha1.ApplicationSetTemplate{
				ApplicationSetTemplateMeta: v1alpha1.ApplicationSetTemplateMeta{Name: "shop-{{name}}"},
				Spec: v1alpha1.ApplicationSpec{
					Project:     v1alpha1.DefaultAppProjectName,
					Source:      &v1alpha1.ApplicationSource{RepoURL: "https://example.invalid/shop.git", Path: ".", TargetRevision: "main"},
					Destination: v1alpha1.ApplicationDestination{Server: v1alpha1.KubernetesInternalAPIServerAddr, Namespace: "shop"},
				},
			},
		},
	}
	require.NoError(t, env.Client.Create(context.Background(), as))
	subject := argocd.AppSetSubject("", argo.Namespace, as.Name)

	c := dial(t, argo.Addr, token)
	logs := &syncBuffer{}
	p := argocd.NewAppSetPoller(argocd.AppSetPollerOptions{Client: c, Log: slog.New(slog.NewTextHandler(logs, nil))})
	rec := &appSetReports{observed: map[string]int{}}
	ctx := context.Background()
	require.Eventually(t, func() bool {
		require.NoError(t, p.Poll(ctx, rec))
		n, _ := rec.counts(subject)
		return n > 0
	}, 30*time.Second, 200*time.Millisecond, "the poller reads the ApplicationSet")

	argo.SetAccountPolicy(t, "appset-reader") // the account's lines removed from argocd-rbac-cm
	// What argocd-server does then: its list leaves the ApplicationSet out, and says nothing of it (a resourceVersion,
	// as a complete list has).
	var list *v1alpha1.ApplicationSetList
	require.Eventually(t, func() bool {
		var err error
		list, err = c.ListApplicationSets(ctx, &applicationset.ApplicationSetListQuery{})
		return err == nil && len(list.Items) == 0
	}, 30*time.Second, 200*time.Millisecond, "argocd-server hides the ApplicationSet once the RBAC line is gone")
	require.NotEmpty(t, list.ResourceVersion, "argocd-server's list looks complete")
	before, _ := rec.counts(subject)
	for range 3 {
		require.NoError(t, p.Poll(ctx, rec))
	}
	after, gone := rec.counts(subject)
	require.Empty(t, gone, "an ApplicationSet hidden by RBAC is not reported gone")
	require.Equal(t, before, after, "nor evaluated while hidden")
	require.Contains(t, logs.String(), "argocd account may not get every applicationset")
	require.Contains(t, logs.String(), "p, role:syncmedic, applicationsets, get, */*, allow")

	argo.SetAccountPolicy(t, "appset-reader", grant...)
	require.Eventually(t, func() bool {
		require.NoError(t, p.Poll(ctx, rec))
		n, _ := rec.counts(subject)
		return n > after
	}, 30*time.Second, 200*time.Millisecond, "read again once the line is back")
	_, gone = rec.counts(subject)
	require.Empty(t, gone)
	require.Contains(t, logs.String(), "argocd applicationsets readable again")

	// The near miss: an ApplicationSet really deleted is reported gone, once.
	require.NoError(t, env.Client.Delete(ctx, as))
	require.Eventually(t, func() bool {
		require.NoError(t, p.Poll(ctx, rec))
		_, gone := rec.counts(subject)
		return len(gone) > 0
	}, 30*time.Second, 200*time.Millisecond, "a deleted ApplicationSet is reported gone")
	_, gone = rec.counts(subject)
	require.Equal(t, []string{subject}, gone)
}
