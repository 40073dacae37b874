package argo

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/applicationset"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// rolloutThreshold is argocd/rollingsync-stalled's threshold in these scenarios (30m by default).
const rolloutThreshold = 20 * time.Second

// scanRollout scans the stack once through argocd-server, as `syncmedic scan --argocd-server` does (applications of
// the rollout's selector, every ApplicationSet), and returns the findings about the rollout's ApplicationSet and
// Applications, and what the scan read.
func scanRollout(t *testing.T, c *argocd.APIClient, ro *testenv.RealRollout) ([]syncmedic.Finding, string) {
	t.Helper()
	th := rules.DefaultThresholds()
	th.RollingSyncStalled = rolloutThreshold
	var read string
	fs, problems, err := argocd.Scan(context.Background(), argocd.ScanOptions{Client: c, Selector: ro.Selector(), Thresholds: th, Read: &read}, time.Now())
	require.NoError(t, err)
	require.Empty(t, problems)
	var mine []syncmedic.Finding
	for _, f := range fs {
		if f.Object.Name == ro.Name || strings.HasPrefix(f.Object.Name, ro.Name+"-") || strings.HasPrefix(f.Object.App, ro.Name+"-") {
			mine = append(mine, f)
		}
	}
	return mine, read
}

// Issue 30 item 5 (argo-cd #19771) on the real controllers: an ApplicationSet rolled out by the real
// applicationset-controller (--enable-progressive-syncs) in three RollingSync steps. Step 1's ConfigMap app becomes
// Healthy; step 2's app syncs a Deployment whose Pod stays Pending, so the app stays Progressing and the controller
// keeps step 2 Progressing and step 3 Waiting. A scan through argocd-server reports argocd/rollingsync-stalled about
// the ApplicationSet, naming step 2 and its application, once the entry is older than the threshold, and nothing
// before. The near miss: the same rollout stopped on purpose at step 2 (maxUpdate 0: its app stays Waiting) is read
// and not reported.
func TestRollingSyncStalled(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" a RollingSync step whose application never becomes healthy is reported", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf("ApplicationSet RollingSync (applicationset-controller --enable-progressive-syncs) of 3 steps; step 2 syncs a Deployment whose Pod stays Pending (scan, rollingsync-stalled %s)", rolloutThreshold))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			ro := testenv.ScenarioRealRollingSync(t, stack, "rollout-stalled", false)
			c := dialStack(t, stack)
			stuck := ro.App(testenv.RolloutStuckApp)
			since := testenv.Entries(ro.Get(t))[stuck].LastTransitionTime.Time

			// Within the threshold: looked at, nothing reported.
			early, read := scanRollout(t, c, ro)
			if time.Since(since) < rolloutThreshold-2*time.Second {
				require.Empty(t, early, "nothing within the threshold")
				require.Contains(t, read, "ApplicationSets", "the scan read the ApplicationSets")
			}

			var mine []syncmedic.Finding
			require.Eventually(t, func() bool {
				mine, read = scanRollout(t, c, ro)
				return len(mine) > 0
			}, rolloutThreshold+announceWithin, time.Second, "argocd/rollingsync-stalled about %s; the controller: %s", ro.Name, testenv.DescribeRollout(ro.Get(t)))
			as := ro.Get(t)
			e := testenv.Entries(as)
			r.Controller = testenv.DescribeRollout(as)
			require.Equal(t, testenv.RolloutHealthy, e[ro.App("first")].Status, r.Controller)
			require.Equal(t, testenv.RolloutProgressing, e[stuck].Status, r.Controller)
			require.Equal(t, testenv.RolloutWaiting, e[ro.App("last")].Status, r.Controller)
			require.True(t, e[stuck].LastTransitionTime.Time.Equal(since), "the controller kept the entry Progressing since %s: %s", since, r.Controller)

			require.Len(t, mine, 1, "one finding, about the ApplicationSet: %v", mine)
			f := mine[0]
			require.Equal(t, syncmedic.RuleRollingSyncStalled, f.Rule)
			require.Equal(t, "ApplicationSet", f.Object.Kind)
			require.Equal(t, ro.Name, f.Object.Name)
			require.Equal(t, stack.Namespace, f.Object.Namespace)
			require.Contains(t, f.Summary, "is held at step 2 of 3")
			require.Contains(t, f.Summary, stuck+" is Progressing/Synced")
			require.Contains(t, f.Summary, "1 application of a later step waits")
			require.Contains(t, f.Remedy.Commands, "argocd app get "+stack.Namespace+"/"+stuck)
			r.Syncmedic = "argocd/rollingsync-stalled about the ApplicationSet: " + f.Summary
		})
		t.Run("on "+version+" a RollingSync stopped on purpose at step 2 (maxUpdate 0) is not reported", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf("ApplicationSet RollingSync of 3 steps, step 2 with maxUpdate 0 (scan, rollingsync-stalled %s)", rolloutThreshold))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			ro := testenv.ScenarioRealRollingSync(t, stack, "rollout-held", true)
			c := dialStack(t, stack)
			held := ro.App(testenv.RolloutStuckApp)
			since := testenv.Entries(ro.Get(t))[held].LastTransitionTime.Time
			// Scan until well past the threshold counted from the held entry's last transition.
			deadline := since.Add(rolloutThreshold + 15*time.Second)
			scans := 0
			for {
				mine, read := scanRollout(t, c, ro)
				scans++
				require.Empty(t, mine, "nothing may be reported about a rollout held by maxUpdate 0")
				require.Contains(t, read, "ApplicationSets")
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(2 * time.Second)
			}
			list, err := c.ListApplicationSets(context.Background(), &applicationset.ApplicationSetListQuery{})
			require.NoError(t, err)
			listed := false
			for _, as := range list.Items {
				listed = listed || as.Name == ro.Name
			}
			require.True(t, listed, "argocd-server lists the ApplicationSet the scan judged")
			as := ro.Get(t)
			r.Controller = testenv.DescribeRollout(as)
			require.Equal(t, testenv.RolloutWaiting, testenv.Entries(as)[held].Status, r.Controller)
			r.Syncmedic = fmt.Sprintf("no finding until %s after step 2's entry last changed: scanned %d times, the ApplicationSet read each time, nothing found", rolloutThreshold+15*time.Second, scans)
		})
	}
}
