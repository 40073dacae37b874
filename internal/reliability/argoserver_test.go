package reliability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appclientset "github.com/argoproj/argo-cd/v2/pkg/client/clientset/versioned"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/incident"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// outageAtTermination plays the application controller, which the tests do not run: when app's operation turns
// Terminating (what TerminateOperation writes), argocd-server becomes unreachable for syncmedic (outage), the
// controller completes the termination as Failed "Operation terminated" meanwhile, and after down the server is
// reachable again (restore) — an argocd-server restart between TerminateOperation and Sync.
//
// hand-written state: the operation Failed "Operation terminated", written at the instant of the outage: the fault
// must fall exactly between TerminateOperation and Sync, which a real controller's timing cannot promise. The real
// v2.14.21 controller terminates for the same remedy in internal/conformance/argo TestFastHookJobWithTTLZero.
func outageAtTermination(t *testing.T, argo *testenv.ArgoCDServer, app string, outage, restore func(), down time.Duration) {
	t.Helper()
	apps, err := appclientset.NewForConfig(argo.Env.Config)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := apps.ArgoprojV1alpha1().Applications(argo.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", app).String()})
	require.NoError(t, err)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			a, ok := testenv.ArgoApplication(ev.Object)
			if !ok || testenv.OperationPhase(a) != synccommon.OperationTerminating {
				continue
			}
			outage()
			st := a.Status.OperationState.DeepCopy()
			now := metav1.Now()
			st.Phase, st.Message, st.FinishedAt = synccommon.OperationFailed, "Operation terminated", &now
			// hand-written state: the Failed operation the controller writes after a terminate, written during an
			// argocd-server outage the test controls (the in-process argocd-server runs no application-controller); the
			// real controller terminates in internal/conformance/argo TestFastHookJobWithTTLZero.
			argo.SetOperationState(t, app, st)
			time.AfterFunc(down, restore)
			return
		}
	}()
}

// argocd-server unreachable for two seconds between TerminateOperation and Sync (a server restart mid-remediation):
// the remedy completes, exactly once — one termination and one new sync in the apiserver — and the incident
// resolves.
func TestArgoCDServerRestartMidRemediationCompletesTheRemedyOnce(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	proxy := testenv.NewProxy(t, argo.Addr)
	// hand-written state: see testenv.ScenarioHookCompletionMissed and outageAtTermination: the in-process
	// argocd-server, restarted mid-remedy, is what this test is about.
	s := testenv.ScenarioHookCompletionMissed(t, argo, "checkout", 0)
	effects := argo.CountOperations(t, s.App.Name)
	restored := make(chan struct{})
	// hand-written state: see outageAtTermination.
	outageAtTermination(t, argo, s.App.Name, proxy.Down, func() { proxy.Up(); close(restored) }, 2*time.Second)
	p := startArgoPipeline(t, argo, proxy.Addr(), "resolveAfter: 1\nrules:\n  argocd/hook-completion-missed:\n    mode: auto\n    rerunHooks: true\n")
	subject := argocd.Subject("", argo.Namespace, s.App.Name)

	missed := func() []incident.Incident {
		var out []incident.Incident
		for _, inc := range p.incidents(subject) {
			if inc.Finding.Rule == syncmedic.RuleHookCompletionMissed {
				out = append(out, inc)
			}
		}
		return out
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		incs := missed()
		if len(incs) != 1 || incs[0].IsOpen() {
			return false, fmt.Sprintf("want one resolved incident, got %d: %+v", len(incs), incs)
		}
		term, syncs := effects.Counts()
		return term == 1 && syncs == 1, "operation effects so far"
	})
	select {
	case <-restored:
	default:
		t.Fatal("the remedy finished while argocd-server was still unreachable")
	}
	inc := missed()[0]
	t.Run("one attempt, succeeded, that terminated and synced", func(t *testing.T) {
		real := realAttempts(inc)
		require.Len(t, real, 1, "%+v", real)
		require.Equal(t, incident.ResultSucceeded, real[0].Result, real[0].Error)
		steps := strings.Join(real[0].Steps, "\n")
		require.Contains(t, steps, "TerminateOperation")
		require.Contains(t, steps, "Sync app=")
	})
	t.Run("the apiserver saw one termination and one new sync of the same revision", func(t *testing.T) {
		term, syncs := effects.Counts()
		require.Equal(t, 1, term)
		require.Equal(t, 1, syncs)
		a := &v1alpha1.Application{}
		require.NoError(t, env.Client.Get(context.Background(), keyOf(argo.Namespace, s.App.Name), a))
		require.NotNil(t, a.Operation)
		require.Equal(t, testenv.Revision, a.Operation.Sync.Revision)
	})
}
