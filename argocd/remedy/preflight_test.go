package remedy

import (
	"context"
	"sync"
	"testing"

	accountpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/account"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/policy"
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

func (c *cani) CanI(_ context.Context, in *accountpkg.CanIRequest, _ ...grpc.CallOption) (*accountpkg.CanIResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := in.Action + " " + in.Subresource
	if in.Resource != argocd.ResourceApplications {
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

func autoPolicy(rules map[syncmedic.RuleID]policy.RulePolicy) *policy.Policy {
	p := policy.DefaultPolicy()
	p.Rules = rules
	return p
}

func TestRemedyPermissions(t *testing.T) {
	auto := policy.RulePolicy{Mode: policy.ModeAuto}
	tests := []struct {
		name    string
		policy  *policy.Policy
		version string
		want    []argocd.Permission
	}{
		{"the default policy acts on nothing and needs nothing", policy.DefaultPolicy(), "v2.14.21", []argocd.Permission{}},
		{"the kill switch needs nothing", func() *policy.Policy {
			p := autoPolicy(map[syncmedic.RuleID]policy.RulePolicy{syncmedic.RuleOperationStuck: auto})
			p.KillSwitch = true
			return p
		}(), "v2.14.21", nil},
		{"terminating and syncing needs sync on the watched scope",
			autoPolicy(map[syncmedic.RuleID]policy.RulePolicy{syncmedic.RuleOperationStuck: auto}), "v2.14.21",
			[]argocd.Permission{{Action: argocd.ActionSync, Object: "*/*"}}},
		{"the finalizer remedy on a v2 server needs update and sync",
			autoPolicy(map[syncmedic.RuleID]policy.RulePolicy{syncmedic.RuleHookFinalizerStuck: auto}), "v2.14.21+abc",
			[]argocd.Permission{{Action: argocd.ActionSync, Object: "*/*"}, {Action: argocd.ActionUpdate, Object: "*/*"}}},
		{"the finalizer remedy on a v3 server also needs the fine-grained update/*",
			autoPolicy(map[syncmedic.RuleID]policy.RulePolicy{syncmedic.RuleHookFinalizerStuck: auto}), "v3.1.0",
			[]argocd.Permission{{Action: argocd.ActionSync, Object: "*/*"}, {Action: argocd.ActionUpdate, Object: "*/*"}, {Action: argocd.ActionUpdateAny, Object: "*/*"}}},
		{"the projects the policy allows replace the watched scope",
			autoPolicy(map[syncmedic.RuleID]policy.RulePolicy{syncmedic.RuleHookCompletionMissed: {Mode: policy.ModeAuto, Projects: []string{"remediable"}}}), "v2.14.21",
			[]argocd.Permission{{Action: argocd.ActionSync, Object: "remediable/*"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RemedyPermissions(tt.policy, []string{"*/*"}, tt.version)
			if len(tt.want) == 0 {
				require.Empty(t, got)
				return
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestCheckRemedies(t *testing.T) {
	perms := []argocd.Permission{{Action: argocd.ActionSync, Object: "*/*"}, {Action: argocd.ActionUpdate, Object: "*/*"}, {Action: argocd.ActionUpdateAny, Object: "*/*"}}
	t.Run("an account with every permission is OK", func(t *testing.T) {
		c := &cani{answers: map[string]any{"sync */*": "yes", "update */*": "yes", "update/* */*": "yes"}}
		res, err := CheckRemedies(context.Background(), c, perms)
		require.NoError(t, err)
		require.True(t, res.OK())
		require.Empty(t, res.Warning())
	})
	t.Run("a missing permission and a question the server cannot answer are both in the warning", func(t *testing.T) {
		c := &cani{answers: map[string]any{"sync */*": "yes", "update */*": "no",
			"update/* */*": status.Error(codes.InvalidArgument, "[get create update delete sync override action invoke] does not contain update/*")}}
		res, err := CheckRemedies(context.Background(), c, perms)
		require.NoError(t, err)
		require.Equal(t, []argocd.Permission{{Action: argocd.ActionUpdate, Object: "*/*"}}, res.Missing)
		require.Equal(t, []argocd.Permission{{Action: argocd.ActionUpdateAny, Object: "*/*"}}, res.Unverified)
		w := res.Warning()
		require.Contains(t, w, "lacks `applications, update, */*`")
		require.Contains(t, w, "they will be refused")
		require.Contains(t, w, "`p, role:syncmedic, applications, update, */*, allow`")
		require.Contains(t, w, "cannot check `applications, update/*, */*`")
		require.Contains(t, w, "`p, role:syncmedic, applications, update/*, */*, allow`")
	})
	t.Run("a server that cannot be reached is an error, not a verdict", func(t *testing.T) {
		c := &cani{answers: map[string]any{"sync */*": status.Error(codes.Unavailable, "connection refused")}}
		_, err := CheckRemedies(context.Background(), c, perms)
		require.Error(t, err)
	})
}
