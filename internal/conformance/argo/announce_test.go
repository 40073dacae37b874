package argo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	smincident "github.com/syncmedic/syncmedic/incident"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
)

// notes keeps the Slack notifier's thread notes in memory.
type notes map[string]string

func (n notes) Note(id, key string) (string, bool)           { v, ok := n[id+"/"+key]; return v, ok }
func (n notes) SetNote(_ context.Context, id, key, v string) { n[id+"/"+key] = v }

// The exact checks read what the real Slack notifier posts: the rule of the incident from its Rule field and the
// object from the fallback text, not a rule ID mentioned anywhere (here in the evidence of a folded finding and in
// a summary with parentheses).
func TestAnnouncementOfReadsTheRuleAndObjectOfARootMessage(t *testing.T) {
	srv := newFakeSlack(t)
	n, err := slacknotify.New(slacknotify.Options{Token: "xoxb-test", Channel: routedChannel, Notes: notes{}, APIURL: srv.GetAPIURL()})
	require.NoError(t, err)
	obj := syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Group: "batch", Version: "v1", Kind: "Job", Namespace: "dest-1", Name: "db-migrate",
		App: "immutable", AppNamespace: "argocd", Project: "default"}
	f := syncmedic.NewFinding(syncmedic.RuleHookImmutable, obj, "Sync of argocd/immutable failed (field is immutable)")
	f.Evidence = []syncmedic.Evidence{{Field: "also (" + string(syncmedic.RuleHookFinalizerStuck) + ")", Value: "the hook finalizer holds it"}}
	inc := smincident.Incident{ID: "a-1", State: smincident.StateFiring, Finding: f, OpenedAt: time.Now()}
	_, err = n.Notify(context.Background(), smincident.Event{Kind: smincident.EventOpened, Incident: inc, At: time.Now()})
	require.NoError(t, err)

	require.Len(t, srv.roots(), 1)
	require.Equal(t, incident{rule: syncmedic.RuleHookImmutable, object: "Job.batch/dest-1/db-migrate"}, announcementOf(srv.roots()[0]))
	_, ok := srv.rootWithRule(string(syncmedic.RuleHookFinalizerStuck))
	require.False(t, ok, "a rule named only in the evidence is not the incident's rule")
	_, ok = srv.rootWithRule(string(syncmedic.RuleHookImmutable))
	require.True(t, ok)
}
