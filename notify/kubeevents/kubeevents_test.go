package kubeevents

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestRemediationLeavesAnEventOnTheObject(t *testing.T) {
	env := testenv.Kube(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: ns}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "m", Image: "busybox"}}}}}}
	require.NoError(t, env.Client.Create(ctx, job))

	f := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD,
		Group: "batch", Version: "v1", Kind: "Job", Namespace: ns, Name: "migrate", UID: string(job.UID)}, "stuck")
	inc := incident.Incident{ID: f.Fingerprint + "-1", State: incident.StateRemediating, Finding: f}
	n := New(Options{Client: env.Clientset, Host: "syncmedic-0"})
	at := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

	_, err := n.Notify(ctx, incident.Event{Kind: incident.EventRemediated, At: at, Incident: inc,
		Attempt: &incident.Attempt{Action: syncmedic.ActionRemoveHookFinalizer, Result: incident.ResultDryRun}})
	require.NoError(t, err)
	retry, err := n.Notify(ctx, incident.Event{Kind: incident.EventRemediated, At: at, Incident: inc,
		Attempt: &incident.Attempt{Action: syncmedic.ActionRemoveHookFinalizer, Result: incident.ResultSucceeded,
			Steps: []string{"PatchResource: remove finalizers/0"}}})
	require.NoError(t, err)
	require.False(t, retry)

	events, err := env.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, events.Items, 1, "a dry-run leaves no Event, an action leaves one")
	e := events.Items[0]
	require.Equal(t, incident.EventReasonRemediation, e.Reason)
	require.Equal(t, corev1.EventTypeNormal, e.Type)
	require.Equal(t, "migrate", e.InvolvedObject.Name)
	require.Equal(t, "Job", e.InvolvedObject.Kind)
	require.Equal(t, "batch/v1", e.InvolvedObject.APIVersion)
	require.Equal(t, job.UID, e.InvolvedObject.UID)
	require.Contains(t, e.Message, string(syncmedic.ActionRemoveHookFinalizer))
	require.Contains(t, e.Message, inc.ID)

	t.Run("a fix a person asked for names them in the Event", func(t *testing.T) {
		_, err := n.Notify(ctx, incident.Event{Kind: incident.EventRemediated, At: at.Add(time.Minute), Incident: inc, Seq: 2,
			Attempt: &incident.Attempt{Action: syncmedic.ActionRemoveHookFinalizer, Result: incident.ResultSucceeded,
				RequestedBy: "argocd user bob via argocd-extension"}})
		require.NoError(t, err)
		events, err := env.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var msgs []string
		for _, e := range events.Items {
			msgs = append(msgs, e.Message)
		}
		require.Contains(t, strings.Join(msgs, "\n"), "at the request of argocd user bob via argocd-extension")
	})
}

func TestEventsInAMissingNamespaceAreNotRetried(t *testing.T) {
	env := testenv.Kube(t)
	f := syncmedic.NewFinding(syncmedic.RuleRetriesExhausted, syncmedic.ObjectRef{Tool: syncmedic.ToolFlux,
		Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease", Namespace: "no-such-namespace", Name: "web"}, "stalled")
	retry, err := New(Options{Client: env.Clientset}).Notify(context.Background(), incident.Event{Kind: incident.EventOpened,
		At: time.Now(), Incident: incident.Incident{ID: "x", Finding: f}})
	require.Error(t, err)
	require.False(t, retry)
}

// A crash between creating an Event and saving its delivery makes the next leader deliver the transition again:
// the numbered transition's Event has one name, so the second delivery finds it and adds nothing.
func TestANumberedTransitionDeliveredTwiceLeavesOneEvent(t *testing.T) {
	env := testenv.Kube(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	f := syncmedic.NewFinding(syncmedic.RuleRetriesExhausted, syncmedic.ObjectRef{Tool: syncmedic.ToolFlux,
		Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease", Namespace: ns, Name: "web"}, "stalled")
	inc := incident.Incident{ID: f.Fingerprint + "-1795444946", State: incident.StateResolved, Finding: f}
	n := New(Options{Client: env.Clientset, Host: "syncmedic-0"})
	resolved := incident.Event{Kind: incident.EventResolved, At: time.Now(), Incident: inc, Seq: 4}
	for _, name := range []string{"the first delivery creates the Event", "the repeated delivery succeeds without a second one"} {
		t.Run(name, func(t *testing.T) {
			retry, err := n.Notify(ctx, resolved)
			require.NoError(t, err)
			require.False(t, retry)
			events, err := env.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			require.Len(t, events.Items, 1)
			require.Equal(t, ReasonIncidentResolved, events.Items[0].Reason)
		})
	}
	t.Run("another transition of the same incident is another Event", func(t *testing.T) {
		opened := incident.Event{Kind: incident.EventOpened, At: time.Now(), Incident: inc, Seq: 1}
		_, err := n.Notify(ctx, opened)
		require.NoError(t, err)
		events, err := env.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, events.Items, 2)
	})
}

// outage fails every request while down is set, as an unreachable apiserver does.
type outage struct {
	rt   http.RoundTripper
	down *atomic.Bool
}

func (o outage) RoundTrip(r *http.Request) (*http.Response, error) {
	if o.down.Load() {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}
	return o.rt.RoundTrip(r)
}

// notify.Durable marks a transition delivered when Notify succeeds: during an outage Notify must fail with retry
// (the transition stays queued, and a stop does not lose it), and once the apiserver answers, the same delivery
// leaves exactly one Event.
func TestAnOutageIsRetriedAndThenLeavesOneEvent(t *testing.T) {
	env := testenv.Kube(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	down := &atomic.Bool{}
	down.Store(true)
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return outage{rt: rt, down: down} }
	n := New(Options{Client: kubernetes.NewForConfigOrDie(cfg), Host: "syncmedic-0"})
	f := syncmedic.NewFinding(syncmedic.RuleRetriesExhausted, syncmedic.ObjectRef{Tool: syncmedic.ToolFlux,
		Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease", Namespace: ns, Name: "web"}, "stalled")
	opened := incident.Event{Kind: incident.EventOpened, At: time.Now(), Seq: 1,
		Incident: incident.Incident{ID: f.Fingerprint + "-1", Finding: f}}

	retry, err := n.Notify(ctx, opened)
	require.ErrorContains(t, err, "create Event "+ReasonIncidentOpened+" on ")
	require.ErrorContains(t, err, "connection refused")
	require.True(t, retry, "an unreachable apiserver is retried")

	down.Store(false)
	retry, err = n.Notify(ctx, opened)
	require.NoError(t, err)
	require.False(t, retry)
	events, err := env.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, events.Items, 1)
	e := events.Items[0]
	require.Equal(t, ReasonIncidentOpened, e.Reason)
	require.Equal(t, corev1.EventTypeWarning, e.Type)
	require.Equal(t, corev1.ObjectReference{APIVersion: "helm.toolkit.fluxcd.io/v2", Kind: "HelmRelease", Namespace: ns,
		Name: "web"}, e.InvolvedObject)
	require.Equal(t, "syncmedic incident "+opened.Incident.ID+" ("+string(syncmedic.RuleRetriesExhausted)+"): stalled", e.Message)
}
