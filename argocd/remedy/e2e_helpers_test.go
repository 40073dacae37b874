package remedy_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	appclientset "github.com/argoproj/argo-cd/v2/pkg/client/clientset/versioned"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// dial returns an argocd.Client through addr (plaintext) with token.
func dial(t *testing.T, addr, token string) *argocd.APIClient {
	t.Setenv("ARGOCD_AUTH_TOKEN", token)
	c, err := argocd.Dial(argocd.ClientOptions{ServerAddr: addr, PlainText: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// seen is one report of findings for a subject, with the time it arrived.
type seen struct {
	at       time.Time
	subject  string
	findings []syncmedic.Finding
}

// recorder is a Sink that keeps every report.
type recorder struct {
	mu      sync.Mutex
	reports []seen
}

func (r *recorder) Observe(_ context.Context, subject string, fs []syncmedic.Finding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, seen{at: time.Now(), subject: subject, findings: fs})
}

// first returns the first finding of rule reported for subject, and when it arrived.
func (r *recorder) first(subject string, rule syncmedic.RuleID) (syncmedic.Finding, time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.reports {
		if s.subject != subject {
			continue
		}
		for _, f := range s.findings {
			if f.Rule == rule {
				return f, s.at, true
			}
		}
	}
	return syncmedic.Finding{}, time.Time{}, false
}

// count returns how many reports subject got.
func (r *recorder) count(subject string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.reports {
		if s.subject == subject {
			n++
		}
	}
	return n
}

// latest returns the last report for subject.
func (r *recorder) latest(subject string) (seen, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.reports) - 1; i >= 0; i-- {
		if r.reports[i].subject == subject {
			return r.reports[i], true
		}
	}
	return seen{}, false
}

// startWatcher runs a Watcher on c until the test ends.
func startWatcher(t *testing.T, c argocd.Client, th rules.Thresholds) (*argocd.Watcher, *recorder, <-chan error) {
	w, err := argocd.NewWatcher(argocd.WatcherOptions{Client: c, Thresholds: th, Resync: time.Second,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	require.NoError(t, err)
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		done <- w.Run(ctx, rec)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return w, rec, done
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// waitFinding waits until rule is reported for the application's subject and returns it with its arrival time.
func waitFinding(t *testing.T, rec *recorder, subject string, rule syncmedic.RuleID, within time.Duration) (syncmedic.Finding, time.Time) {
	t.Helper()
	var f syncmedic.Finding
	var at time.Time
	require.Eventually(t, func() bool {
		var ok bool
		f, at, ok = rec.first(subject, rule)
		return ok
	}, within, 20*time.Millisecond, "no %s finding for %s", rule, subject)
	return f, at
}

// playController stands in for the application controller, which the tests do not run: when an operation of
// appName turns Terminating (what TerminateOperation writes), it calls before() and then completes the operation
// as Failed "Operation terminated", clearing .operation, as the controller's terminate path does.
//
// hand-written state: the operation Failed "Operation terminated" after a TerminateOperation, on the in-process
// argocd-server, which runs no application-controller (these tests prove the remedies through argocd-server's API,
// with its streams cut). The real v2.14.21 controller terminates a lost-hook sync for the same remedy in
// internal/conformance/argo TestFastHookJobWithTTLZero and TestSyncWindowHoldsTheTerminateOfALostHook.
func playController(t *testing.T, argo *testenv.ArgoCDServer, appName string, before func()) {
	apps, err := appclientset.NewForConfig(argo.Env.Config)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := apps.ArgoprojV1alpha1().Applications(argo.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", appName).String()})
	require.NoError(t, err)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			app, ok := testenv.ArgoApplication(ev.Object)
			if !ok || app.Status.OperationState == nil || app.Status.OperationState.Phase != synccommon.OperationTerminating {
				continue
			}
			if before != nil {
				before()
			}
			state := app.Status.OperationState.DeepCopy()
			now := metav1.Now()
			state.Phase, state.Message, state.FinishedAt = synccommon.OperationFailed, "Operation terminated", &now
			// hand-written state: the Failed operation the controller writes after a terminate (the in-process
			// argocd-server runs no application-controller; playController stands in for it). The real v2.14.21
			// controller terminates and re-syncs in internal/conformance/argo TestFastHookJobWithTTLZero.
			argo.SetOperationState(t, appName, state)
			return
		}
	}()
}

// snapshot returns the Application and the Job as the apiserver stores them, for byte-for-byte comparisons.
func snapshotObjects(t *testing.T, argo *testenv.ArgoCDServer, appName, jobNS, jobName string) string {
	t.Helper()
	app, err := getApp(argo, appName)
	require.NoError(t, err)
	a, err := json.Marshal(app)
	require.NoError(t, err)
	if jobName == "" {
		return string(a)
	}
	job := &batchv1.Job{}
	err = argo.Env.Client.Get(context.Background(), keyOf(jobNS, jobName), job)
	if apierrors.IsNotFound(err) {
		return string(a) + "\nJob: absent"
	}
	require.NoError(t, err)
	j, err := json.Marshal(job)
	require.NoError(t, err)
	return string(a) + "\n" + string(j)
}

func getApp(argo *testenv.ArgoCDServer, name string) (*v1alpha1.Application, error) {
	app := &v1alpha1.Application{}
	err := argo.Env.Client.Get(context.Background(), keyOf(argo.Namespace, name), app)
	return app, err
}

// jobGone reports whether the Job no longer exists in the apiserver.
func jobGone(argo *testenv.ArgoCDServer, ns, name string) bool {
	err := argo.Env.Client.Get(context.Background(), keyOf(ns, name), &batchv1.Job{})
	return apierrors.IsNotFound(err)
}
