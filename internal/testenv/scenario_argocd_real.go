package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// Scenarios driven by a real Argo CD stack (ArgoCDStack): each Application's source is a local git repository of hook
// Jobs and a ConfigMap, synced through argocd-server's API, its hooks run by the real Job, TTL-after-finished and
// garbage-collector controllers. On KubeWithControllers the test plays the kubelet (Env.Kubelet moves each hook's Pod
// as its PodRun says); on a real node's control plane (RealNode, RealNodeWhileUsed: where internal/conformance/argo
// runs them all) each hook's Pod runs for real, a busybox container whose command does what its PodRun says, and
// counts its starts (RealHookApp.Runs).

// PodRun says what the kubelet does with a hook Job's Pod.
type PodRun int

const (
	// PodSucceeds: the Pod runs and exits 0 at once.
	PodSucceeds PodRun = iota
	// PodRunsUntilReleased: the Pod stays Running until RealHookApp.Release.
	PodRunsUntilReleased
	// PodFails: the Pod runs and exits 1 at once.
	PodFails
	// PodSleeps: the Pod runs for RealHook.Sleep, then exits 0 (on a real node only: `sleep N`).
	PodSleeps
	// PodSucceedsUnseen: the Pod exits 0 before the application-controller looks (with ttlSecondsAfterFinished: 0
	// the hook loses the fast-Job race on every run). The played kubelet succeeds it at once; on a real node its
	// container waits until the app's race loser has paused the controller (scenario_unseen.go).
	PodSucceedsUnseen
)

// nodeHookDir is where a hook's container on a real node finds its host directory (a hostPath volume): it appends a
// line to <job>.runs when it starts, and a PodRunsUntilReleased hook waits for <job>.release.
const nodeHookDir = "/syncmedic-hooks"

// RealHook is a hook Job in git.
type RealHook struct {
	// Name of the Job (hooks with a fixed name, as charts write them).
	Name string
	// Hook is argocd.argoproj.io/hook; default PreSync.
	Hook synccommon.HookType
	// DeletePolicy is argocd.argoproj.io/hook-delete-policy; empty leaves the annotation out (Argo CD then applies
	// BeforeHookCreation).
	DeletePolicy synccommon.HookDeletePolicy
	// Wave is argocd.argoproj.io/sync-wave.
	Wave int
	// TTL is spec.ttlSecondsAfterFinished; nil leaves it out.
	TTL *int32
	// Image of the container with the played kubelet; changing it changes the Job's (immutable) Pod template. A real
	// node runs only NodeBusyboxImage: there Image is written as the Pod template's annotation nodeImageAnnotation, so
	// that changing it still changes the template.
	Image string
	// Run is what the kubelet does with the Job's Pod.
	Run PodRun
	// Sleep is how long a PodSleeps hook's container runs.
	Sleep time.Duration
}

// TTL returns a pointer to seconds, for RealHook.TTL.
func TTL(seconds int32) *int32 { return &seconds }

// nodeImageAnnotation carries RealHook.Image in the Pod template of a hook on a real node (which runs only
// NodeBusyboxImage).
const nodeImageAnnotation = "testenv.syncmedic.io/image"

// manifest is the Job's YAML: for the played kubelet (hostDir empty) a container that never runs; for a real node a
// busybox container that appends to hostDir/<name>.runs when it starts, then does what Run says.
func (h RealHook) manifest(hostDir string) string {
	if h.Hook == "" {
		h.Hook = synccommon.HookTypePreSync
	}
	if h.Image == "" && hostDir == "" {
		h.Image = "busybox:1.36"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: %s\n  annotations:\n", h.Name)
	fmt.Fprintf(&b, "    argocd.argoproj.io/hook: %s\n", h.Hook)
	if h.DeletePolicy != "" {
		fmt.Fprintf(&b, "    argocd.argoproj.io/hook-delete-policy: %s\n", h.DeletePolicy)
	}
	fmt.Fprintf(&b, "    argocd.argoproj.io/sync-wave: %q\n", fmt.Sprint(h.Wave))
	b.WriteString("spec:\n  backoffLimit: 0\n")
	if h.TTL != nil {
		fmt.Fprintf(&b, "  ttlSecondsAfterFinished: %d\n", *h.TTL)
	}
	if hostDir == "" {
		fmt.Fprintf(&b, "  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: main\n        image: %s\n        command: [\"true\"]\n", h.Image)
		return b.String()
	}
	b.WriteString("  template:\n")
	if h.Image != "" {
		fmt.Fprintf(&b, "    metadata:\n      annotations:\n        %s: %q\n", nodeImageAnnotation, h.Image)
	}
	b.WriteString("    spec:\n      restartPolicy: Never\n      terminationGracePeriodSeconds: 1\n")
	fmt.Fprintf(&b, "      containers:\n      - name: main\n        image: %s\n        imagePullPolicy: Never\n", NodeBusyboxImage)
	fmt.Fprintf(&b, "        command: [\"sh\", \"-c\", %q]\n", h.nodeScript())
	fmt.Fprintf(&b, "        volumeMounts:\n        - {name: hooks, mountPath: %s}\n", nodeHookDir)
	fmt.Fprintf(&b, "      volumes:\n      - name: hooks\n        hostPath: {path: %q, type: Directory}\n", hostDir)
	return b.String()
}

// nodeScript is the shell command of the hook's container on a real node: count the start, then `true`, `exit 1`,
// `sleep N`, or wait for the release file.
func (h RealHook) nodeScript() string {
	start := fmt.Sprintf("echo \"$HOSTNAME\" >> %s/%s.runs", nodeHookDir, h.Name)
	switch h.Run {
	case PodFails:
		return start + " && exit 1"
	case PodSleeps:
		return fmt.Sprintf("%s && sleep %d", start, int(h.Sleep.Round(time.Second)/time.Second))
	case PodRunsUntilReleased:
		return fmt.Sprintf("%s && while [ ! -e %s/%s.release ]; do sleep 0.2; done", start, nodeHookDir, h.Name)
	case PodSucceedsUnseen:
		return fmt.Sprintf("%s && while [ ! -e %s/%s.unseen ]; do sleep 0.2; done", start, nodeHookDir, h.Name)
	default:
		return start + " && true"
	}
}

// RealHookApp is an Application of a real Argo CD stack whose source is its own git repository: a ConfigMap
// "settings" and the hook Jobs, in a fresh destination namespace whose Pods the test's kubelet runs.
type RealHookApp struct {
	Stack *RealArgoCD
	Repo  *GitRepo
	// Name of the Application (unique: stacks are shared).
	Name string
	// Namespace is the destination namespace (hooks and the ConfigMap live there).
	Namespace string
	// Kubelet runs the namespace's Pods as each hook's Run says (played; nil on a real node).
	Kubelet *Kubelet
	// Node is the real node the hooks run on (nil with the played kubelet); HostDir the host directory their
	// containers count their starts in and find their release files.
	Node    *Node
	HostDir string

	mu       sync.Mutex
	runs     map[string]PodRun
	released map[string]bool
}

// ConfigMapData is the ConfigMap "settings" of a RealHookApp: its data, and whether it is immutable (a change to
// an immutable ConfigMap's data fails to apply, though a client-side dry run passes).
type ConfigMapData struct {
	Data      map[string]string
	Immutable bool
	// Elsewhere, when set, adds a second ConfigMap "extra" for that namespace: one that does not exist makes the
	// apply fail ("namespaces ... not found") while the client-side dry run passes.
	Elsewhere string
}

func (c ConfigMapData) manifest() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n")
	if c.Immutable {
		b.WriteString("immutable: true\n")
	}
	b.WriteString("data:\n")
	keys := make([]string, 0, len(c.Data))
	for k := range c.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %q\n", k, c.Data[k])
	}
	if len(keys) == 0 {
		b.WriteString("  revision: \"1\"\n")
	}
	if c.Elsewhere != "" {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: %s\ndata:\n  k: v\n", c.Elsewhere)
	}
	return b.String()
}

// RealAppLabel labels each RealHookApp's Application with its name, so a watcher of a shared stack can select one
// (syncmedic serve --argocd-selector RealAppLabel=NAME).
const RealAppLabel = "testenv.syncmedic.io/app"

// Selector is the label selector matching only this app's Application.
func (a *RealHookApp) Selector() string { return RealAppLabel + "=" + a.Name }

// NewRealHookApp creates the git repository (the ConfigMap and hooks committed), the destination namespace, its
// kubelet and the Application (manual sync, project default) on stack, and waits until argocd-server knows it.
func NewRealHookApp(t testing.TB, stack *RealArgoCD, name string, cm ConfigMapData, hooks ...RealHook) *RealHookApp {
	t.Helper()
	a := newRealHookApp(t, stack, name)
	a.write(t, cm, hooks)
	a.Repo.Commit(t, "app "+a.Name)
	a.playKubelet(t, a.decide)
	a.loseRaces(t, unseenHooks(hooks)...)
	app := &v1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: stack.Namespace, Labels: map[string]string{RealAppLabel: a.Name}},
		Spec: v1alpha1.ApplicationSpec{
			Project:     v1alpha1.DefaultAppProjectName,
			Source:      &v1alpha1.ApplicationSource{RepoURL: a.Repo.URL, Path: "app", TargetRevision: "main"},
			Destination: v1alpha1.ApplicationDestination{Server: v1alpha1.KubernetesInternalAPIServerAddr, Namespace: a.Namespace},
		},
	}
	stack.CreateApplication(t, app)
	return a
}

// newRealHookApp is a RealHookApp with its git repository and destination namespace, nothing committed yet; on a
// real node, with the host directory of its hooks.
func newRealHookApp(t testing.TB, stack *RealArgoCD, name string) *RealHookApp {
	t.Helper()
	a := &RealHookApp{Stack: stack, Repo: NewGitRepo(t), Name: uniqueName(name), Namespace: stack.Env.Namespace(t),
		runs: map[string]PodRun{}, released: map[string]bool{}, Node: stack.Env.node}
	if a.Node != nil {
		a.HostDir = filepath.Join(a.Node.Dir, "hooks", a.Namespace)
		if err := os.MkdirAll(a.HostDir, 0o755); err != nil {
			t.Fatalf("testenv: creating the hooks' host directory: %v", err)
		}
	}
	return a
}

// unseenHooks returns the names of the PodSucceedsUnseen hooks.
func unseenHooks(hooks []RealHook) []string {
	var names []string
	for _, h := range hooks {
		if h.Run == PodSucceedsUnseen {
			names = append(names, h.Name)
		}
	}
	return names
}

// playKubelet starts the played kubelet with decide for the app's namespace, unless the app's Pods run on a real
// node.
func (a *RealHookApp) playKubelet(t testing.TB, decide PodDecision) {
	t.Helper()
	if a.Node == nil {
		a.Kubelet = a.Stack.Env.Kubelet(t, a.Namespace, decide)
	}
}

// Update rewrites the ConfigMap and hooks in git and commits (the next sync uses them).
func (a *RealHookApp) Update(t testing.TB, cm ConfigMapData, hooks ...RealHook) string {
	t.Helper()
	a.Repo.Remove(t, "app")
	a.write(t, cm, hooks)
	return a.Repo.Commit(t, "update "+a.Name)
}

func (a *RealHookApp) write(t testing.TB, cm ConfigMapData, hooks []RealHook) {
	t.Helper()
	a.Repo.Write(t, "app/configmap.yaml", cm.manifest())
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, h := range hooks {
		a.Repo.Write(t, "app/hook-"+h.Name+".yaml", h.manifest(a.HostDir))
		a.runs[h.Name] = h.Run
	}
}

// decide is the kubelet's decision for a hook Job's Pod (Pods are labelled with their Job's name).
func (a *RealHookApp) decide(pod *corev1.Pod) (corev1.PodPhase, bool) {
	job := pod.Labels[batchv1.JobNameLabel]
	if job == "" {
		job = pod.Labels["job-name"]
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	run, ok := a.runs[job]
	if !ok {
		return "", false
	}
	switch {
	case run == PodFails:
		return corev1.PodFailed, true
	case run == PodRunsUntilReleased && !a.released[job]:
		return corev1.PodRunning, true
	default:
		return corev1.PodSucceeded, true
	}
}

// Release lets the Pod of hook Job name (held by PodRunsUntilReleased) exit 0; on a real node, by creating the file
// its container waits for (every later run of the hook exits at once too).
func (a *RealHookApp) Release(t testing.TB, name string) {
	t.Helper()
	if a.Node != nil {
		if err := os.WriteFile(filepath.Join(a.HostDir, name+".release"), nil, 0o644); err != nil {
			t.Fatalf("testenv: releasing hook %s: %v", name, err)
		}
		return
	}
	a.mu.Lock()
	a.released[name] = true
	a.mu.Unlock()
	a.Kubelet.Poke()
}

// Hold undoes Release: the Pod of the next run of hook Job name (PodRunsUntilReleased) stays Running until Release is
// called again, so that a test can pause the controller before that run finishes.
func (a *RealHookApp) Hold(t testing.TB, name string) {
	t.Helper()
	if a.Node != nil {
		if err := os.Remove(filepath.Join(a.HostDir, name+".release")); err != nil && !os.IsNotExist(err) {
			t.Fatalf("testenv: holding hook %s: %v", name, err)
		}
		return
	}
	a.mu.Lock()
	a.released[name] = false
	a.mu.Unlock()
}

// Runs returns how many times the container of hook Job name started on the real node (Node.HookRuns); it fails the
// test with the played kubelet, which runs nothing.
func (a *RealHookApp) Runs(t testing.TB, name string) int {
	t.Helper()
	if a.Node == nil {
		t.Fatalf("testenv: hook %s: only a real node counts what ran", name)
	}
	runs, err := HookRuns(a.HostDir, name)
	if err != nil {
		t.Fatalf("testenv: counting the runs of hook %s: %v", name, err)
	}
	return len(runs)
}

// Sync starts a sync of the app's target revision through argocd-server's ApplicationService (what `argocd app
// sync` does), hook strategy.
func (a *RealHookApp) Sync(t testing.TB) { a.SyncWithOptions(t) }

// SyncWithOptions is Sync with sync options (what `argocd app sync --sync-option` and `--replace` send).
func (a *RealHookApp) SyncWithOptions(t testing.TB, options ...string) {
	t.Helper()
	req := &applicationpkg.ApplicationSyncRequest{Name: &a.Name, AppNamespace: &a.Stack.Namespace}
	if len(options) > 0 {
		req.SyncOptions = &applicationpkg.SyncOptions{Items: options}
	}
	apps := a.Stack.Applications(t, a.Stack.cachedAdminToken(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	// The repo-server may still be cloning the new repository: retry while it answers with a transient error.
	for deadline := time.Now().Add(time.Minute); ; {
		_, err = apps.Sync(ctx, req)
		if err == nil || time.Now().After(deadline) || strings.Contains(err.Error(), "another operation is already in progress") {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("testenv: syncing %s: %v", a.Name, err)
	}
}

// DeleteJob deletes one of the app's Jobs through argocd-server's ApplicationService (what `argocd app
// delete-resource APP --kind Job --group batch --resource-name NAME --namespace NS` does).
func (a *RealHookApp) DeleteJob(t testing.TB, name string) {
	t.Helper()
	apps := a.Stack.Applications(t, a.Stack.cachedAdminToken(t))
	group, version, kind := "batch", "v1", "Job"
	if _, err := apps.DeleteResource(context.Background(), &applicationpkg.ApplicationResourceDeleteRequest{
		Name: &a.Name, AppNamespace: &a.Stack.Namespace, Namespace: &a.Namespace, ResourceName: &name,
		Group: &group, Version: &version, Kind: &kind}); err != nil {
		t.Fatalf("testenv: deleting Job %s/%s through Argo CD: %v", a.Namespace, name, err)
	}
}

// Terminate asks argocd-server to terminate the running operation (what `argocd app terminate-op` does).
func (a *RealHookApp) Terminate(t testing.TB) {
	t.Helper()
	apps := a.Stack.Applications(t, a.Stack.cachedAdminToken(t))
	if _, err := apps.TerminateOperation(context.Background(), &applicationpkg.OperationTerminateRequest{
		Name: &a.Name, AppNamespace: &a.Stack.Namespace}); err != nil {
		t.Fatalf("testenv: terminating the operation of %s: %v", a.Name, err)
	}
}

// Get reads the Application from the apiserver.
func (a *RealHookApp) Get(t testing.TB) *v1alpha1.Application {
	t.Helper()
	app := &v1alpha1.Application{}
	if err := a.Stack.Env.Client.Get(context.Background(), clientKey(a.Stack.Namespace, a.Name), app); err != nil {
		t.Fatalf("testenv: reading Application %s: %v", a.Name, err)
	}
	return app
}

// WaitApp polls the Application until cond holds or timeout passes, and returns it as last read and whether cond
// held. Scenarios use it for bounded observations ("did the operation finish within 60 s?").
func (a *RealHookApp) WaitApp(t testing.TB, timeout time.Duration, cond func(*v1alpha1.Application) bool) (*v1alpha1.Application, bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		app := a.Get(t)
		if cond(app) {
			return app, true
		}
		if time.Now().After(deadline) {
			return app, false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// OperationCompleted holds when the app's operation state has finished (Succeeded, Failed or Error) and no new
// operation is requested.
func OperationCompleted(app *v1alpha1.Application) bool {
	return app.Operation == nil && app.Status.OperationState != nil && app.Status.OperationState.Phase.Completed()
}

// OperationRunningSince holds when the app's operation is Running and started at or after since (a sync started by
// the test, not a previous one).
func OperationRunningSince(since time.Time) func(*v1alpha1.Application) bool {
	return func(app *v1alpha1.Application) bool {
		st := app.Status.OperationState
		return st != nil && st.Phase == synccommon.OperationRunning && !st.StartedAt.Time.Before(since.Truncate(time.Second))
	}
}

// DescribeOperation summarises an Application's operation state for a conformance row: "Running: waiting for
// completion of hook batch/Job/x (hooks: x Running)".
func DescribeOperation(app *v1alpha1.Application) string {
	st := app.Status.OperationState
	if st == nil {
		return "no operation"
	}
	msg := st.Message
	if len(msg) > 240 {
		msg = msg[:240] + "…"
	}
	s := string(st.Phase)
	if msg != "" {
		s += ": " + msg
	}
	if st.SyncResult != nil {
		var hooks []string
		for _, r := range st.SyncResult.Resources {
			if r.HookType != "" {
				hooks = append(hooks, fmt.Sprintf("%s %s", r.Name, r.HookPhase))
			}
		}
		if len(hooks) > 0 {
			slices.Sort(hooks) // the controller's order varies from run to run
			s += " (hooks: " + strings.Join(hooks, ", ") + ")"
		}
	}
	return s
}

// JobState reads hook Job name and describes it for a conformance row: "absent", "Complete", "Running",
// "deleting, finalizers [argocd.argoproj.io/hook-finalizer], Complete". The description is the same from run to run
// whatever the garbage collector's timing: the foregroundDeletion finalizer, which the garbage collector adds to a
// Job deleted in the foreground (the TTL controller's way) and removes at its own time once the Job's Pods are gone,
// is left out of it; and a Job whose deletion nothing else holds is waited for (up to gcWait) and described once
// gone ("absent"). The returned job is the last read, with every finalizer.
func (a *RealHookApp) JobState(t testing.TB, name string) (job *batchv1.Job, desc string) {
	t.Helper()
	job = a.readJob(t, name)
	if onlyCollectorHolds(job) {
		deadline := time.Now().Add(gcWait)
		for onlyCollectorHolds(job) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			job = a.readJob(t, name)
		}
	}
	return job, DescribeJob(job)
}

// gcWait bounds how long JobState waits for the garbage collector to finish deleting a Job only it holds: seconds
// normally (its Pods go first).
const gcWait = 30 * time.Second

// foregroundDeletion is the garbage collector's finalizer on an object deleted in the foreground.
const foregroundDeletion = metav1.FinalizerDeleteDependents

// onlyCollectorHolds reports whether job is being deleted and held by no finalizer but the garbage collector's.
func onlyCollectorHolds(job *batchv1.Job) bool {
	return job != nil && job.DeletionTimestamp != nil && len(withoutCollector(job.Finalizers)) == 0
}

// withoutCollector returns finalizers without the garbage collector's foregroundDeletion.
func withoutCollector(finalizers []string) []string {
	return slices.DeleteFunc(slices.Clone(finalizers), func(f string) bool { return f == foregroundDeletion })
}

// DescribeJob describes job as JobState does, without waiting: nil is "absent"; foregroundDeletion is left out of
// the finalizers.
func DescribeJob(job *batchv1.Job) string {
	if job == nil {
		return "absent"
	}
	state := "Running"
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			state = string(c.Type)
		}
	}
	finalizers := withoutCollector(job.Finalizers)
	switch {
	case job.DeletionTimestamp != nil && len(finalizers) == 0:
		return "deleting (garbage collector), " + state
	case job.DeletionTimestamp != nil:
		return fmt.Sprintf("deleting, finalizers %v, %s", finalizers, state)
	case len(finalizers) > 0:
		return fmt.Sprintf("%s, finalizers %v", state, finalizers)
	}
	return state
}

// readJob reads hook Job name; nil when it does not exist.
func (a *RealHookApp) readJob(t testing.TB, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	err := a.Stack.Env.Client.Get(context.Background(), clientKey(a.Namespace, name), job)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("testenv: reading Job %s/%s: %v", a.Namespace, name, err)
	}
	return job
}

// WaitJob polls hook Job name until cond holds (job is nil when absent) or timeout passes; it returns whether cond
// held.
func (a *RealHookApp) WaitJob(t testing.TB, name string, timeout time.Duration, cond func(job *batchv1.Job) bool) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond(a.readJob(t, name)) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitControllerSees waits (up to 2 minutes) until the application-controller's cluster cache holds the app's Job
// name as the apiserver has it now: the resource tree argocd-server serves, which the controller writes from its
// cache, lists the Job at its current resourceVersion. What a sync does to an existing object (v3.6.1 removes the
// hook finalizer from an existing hook) it does to the object in that cache.
func (a *RealHookApp) waitControllerSees(t testing.TB, name string) {
	t.Helper()
	apps := a.Stack.Applications(t, a.Stack.cachedAdminToken(t))
	var want, seen string
	for deadline := time.Now().Add(2 * time.Minute); ; {
		job := a.readJob(t, name)
		if job == nil {
			t.Fatalf("testenv: Job %s/%s is gone", a.Namespace, name)
		}
		want = job.ResourceVersion
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		tree, err := apps.ResourceTree(ctx, &applicationpkg.ResourcesQuery{ApplicationName: &a.Name, AppNamespace: &a.Stack.Namespace})
		cancel()
		if err == nil {
			for _, n := range tree.Nodes {
				if n.Group == "batch" && n.Kind == "Job" && n.Namespace == a.Namespace && n.Name == name {
					seen = n.ResourceVersion
				}
			}
			if seen == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: after 2m the application-controller's resource tree of %s has Job %s/%s at resourceVersion %q, the apiserver at %q (last error: %v)",
				a.Name, a.Namespace, name, seen, want, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cachedAdminToken logs admin in once per server.
func (a *ArgoCDServer) cachedAdminToken(t testing.TB) string {
	t.Helper()
	a.adminMu.Lock()
	defer a.adminMu.Unlock()
	if a.adminToken == "" && !a.disableAuth {
		a.adminToken = a.AdminToken(t)
	}
	return a.adminToken
}

// ScenarioRealFastHook: a PreSync hook Job with ttlSecondsAfterFinished: 0 whose Pod exits 0 at once (argo-cd
// #21055, #6880: the Kyverno clean-reports hook), synced on the real stack. The Job completes and the real TTL
// controller deletes it immediately; what the controller then does with the operation is the observation. It
// returns the app right after the sync starts.
func ScenarioRealFastHook(t testing.TB, stack *RealArgoCD) *RealHookApp {
	t.Helper()
	app := NewRealHookApp(t, stack, "fast-hook", ConfigMapData{},
		RealHook{Name: "clean-reports", Hook: synccommon.HookTypePreSync, TTL: TTL(0), Run: PodSucceeds})
	app.Sync(t)
	return app
}

// ScenarioRealSlowAndFastWave: one PreSync wave with two hooks, "slow" (its Pod held Running until Release) and
// "fast" (ttlSecondsAfterFinished: 0, exits before the controller looks: PodSucceedsUnseen). It returns once the
// fast Job has completed and the TTL controller has deleted it (on v3 it stays deleting, held by the hook finalizer
// until the wave ends — by design; on v2 it is gone). The operation is Running, healthy: Release("slow") lets it
// finish. On a real node the resumed v2.14.21 controller can still replay the fast Job's completion from its watch
// before the deletion and see it finish after all: that app is left (its slow hook released) and another one tried,
// at most unseenAttempts times.
func ScenarioRealSlowAndFastWave(t testing.TB, stack *RealArgoCD) *RealHookApp {
	t.Helper()
	for attempt := 1; ; attempt++ {
		app := NewRealHookApp(t, stack, "slow-fast-wave", ConfigMapData{},
			RealHook{Name: "slow", Hook: synccommon.HookTypePreSync, Run: PodRunsUntilReleased},
			RealHook{Name: "fast", Hook: synccommon.HookTypePreSync, TTL: TTL(0), Run: PodSucceedsUnseen})
		app.Sync(t)
		// Created by the controller first (absent before), then deleted by the TTL controller once complete.
		created := false
		if !app.WaitJob(t, "fast", 2*time.Minute, func(job *batchv1.Job) bool {
			created = created || job != nil
			return created && (job == nil || job.DeletionTimestamp != nil)
		}) {
			_, desc := app.JobState(t, "fast")
			t.Fatalf("testenv: the fast hook Job was not TTL-deleted within 2m (%s; operation %s)", desc, DescribeOperation(app.Get(t)))
		}
		if !app.sawUnseenHook(t, "fast") || attempt == unseenAttempts {
			return app
		}
		t.Logf("testenv: attempt %d: the resumed controller replayed the fast hook's completion and saw it finish: %s",
			attempt, DescribeOperation(app.Get(t)))
		app.Release(t, "slow")
	}
}

// unseenAttempts bounds the apps a scenario tries until a PodSucceedsUnseen hook's run stays unseen on a real node.
const unseenAttempts = 3

// unseenReplayWindow is how long sawUnseenHook watches the operation after the controller resumed: it replays what
// it missed while paused within a second or two.
const unseenReplayWindow = 10 * time.Second

// sawUnseenHook reports whether, on a real node, Argo CD v2 recorded the PodSucceedsUnseen hook name Succeeded
// within unseenReplayWindow after its Job was deleted (the replay of its watch events after the race loser resumed
// it); it is false with the played kubelet and on v3, whose hook finalizer keeps the Job until the controller saw it.
func (a *RealHookApp) sawUnseenHook(t testing.TB, name string) bool {
	t.Helper()
	if a.Node == nil || a.Stack.Version != ArgoCDV2 {
		return false
	}
	_, saw := a.WaitApp(t, unseenReplayWindow, func(app *v1alpha1.Application) bool {
		return HookResult(app, name) == synccommon.OperationSucceeded
	})
	return saw
}

// ScenarioRealRunningHook: a sync still running its PreSync hook (Pod held Running until Release): healthy. It
// returns once the operation is Running with the hook Job's Pod running, and the controller has passed over the
// running hook at least once: the pass that creates the hook says "waiting for completion of hook
// batch/Job/migrate and 1 more hooks" (its remaining tasks: the hook and the Sync-phase ConfigMap, gitops-engine
// sync_context.go setRunningPhase(remainingTasks)), the passes after it "waiting for completion of hook
// batch/Job/migrate" (the running tasks only). A conformance row read at the first would depend on the moment.
func ScenarioRealRunningHook(t testing.TB, stack *RealArgoCD) *RealHookApp {
	t.Helper()
	app := NewRealHookApp(t, stack, "running-hook", ConfigMapData{},
		RealHook{Name: "migrate", Hook: synccommon.HookTypePreSync, Run: PodRunsUntilReleased})
	start := time.Now()
	app.Sync(t)
	if got, ok := app.WaitApp(t, 2*time.Minute, func(app *v1alpha1.Application) bool {
		return OperationRunningSince(start)(app) && app.Status.OperationState.Message == "waiting for completion of hook batch/Job/migrate"
	}); !ok {
		t.Fatalf("testenv: the sync of %s is not waiting for its hook after 2m: %s", app.Name, DescribeOperation(got))
	}
	return app
}

// ScenarioRealFailedWaveHookLeak reproduces the hook-finalizer leak of Argo CD 3.0 before v3.0.16 (fixed in
// gitops-engine by awaiting or terminating the running hooks when a wave fails to apply): a Sync hook Job
// (ttlSecondsAfterFinished: 0) in the same wave as a resource that fails to apply — a ConfigMap for a namespace that
// does not exist (the client-side dry run passes, the apply fails). v3.0.12 marks the operation Failed ("one or
// more objects failed to apply") while the hook it just created, with argocd.argoproj.io/hook-finalizer, still
// runs; nothing removes the finalizer afterwards, so when the TTL controller deletes the finished Job it stays
// deleting forever. v3.6.1 waits for the running hook, removes the finalizer, then fails the operation.
//
// The first sync (without the bad ConfigMap) must succeed; the second is the failing one. It returns after starting
// the second sync, with the time it started.
func ScenarioRealFailedWaveHookLeak(t testing.TB, stack *RealArgoCD) (*RealHookApp, time.Time) {
	t.Helper()
	return ScenarioRealFailedWave(t, stack, FailedWaveHook)
}

// ScenarioRealFailedWave is ScenarioRealFailedWaveHookLeak with another Sync hook: with KeptWaveHook (no TTL) the
// hook Job v3.0.12 leaks the finalizer on stays, complete and not deleted, instead of being stuck deleting. It
// returns after starting the second (failing) sync, with the time it started.
func ScenarioRealFailedWave(t testing.TB, stack *RealArgoCD, hook RealHook) (*RealHookApp, time.Time) {
	t.Helper()
	app := NewRealHookApp(t, stack, "failed-wave", ConfigMapData{}, hook)
	app.Sync(t)
	if got, ok := app.WaitApp(t, 2*time.Minute, OperationCompleted); !ok || got.Status.OperationState.Phase != synccommon.OperationSucceeded {
		t.Fatalf("testenv: the first sync of %s did not succeed within 2m: %s", app.Name, DescribeOperation(got))
	}
	app.Update(t, ConfigMapData{Elsewhere: app.Namespace + "-missing"}, hook)
	start := time.Now()
	app.Sync(t)
	return app, start
}

// KeptWaveHook is FailedWaveHook without ttlSecondsAfterFinished: the finished Job stays (ScenarioRealFailedWave).
var KeptWaveHook = RealHook{Name: "report", Hook: synccommon.HookTypeSync, Run: PodSucceeds}

// FailedWaveHook is the Sync hook of ScenarioRealFailedWaveHookLeak.
var FailedWaveHook = RealHook{Name: "report", Hook: synccommon.HookTypeSync, TTL: TTL(0), Run: PodSucceeds}

// ScenarioRealImmutableHook: a named PreSync hook Job with hook-delete-policy HookSucceeded whose first run fails
// (so it is kept: only a success would delete it, and the policy replaces BeforeHookCreation); the fix changes its
// Pod template (the image) in git and the app is synced again, with the failed Job still present. Applying the hook
// over it is refused by the apiserver ("field is immutable"), the hook task fails, and HookSucceeded keeps the old
// Job again: every later sync fails the same way. It returns after starting the second sync, with the time it
// started.
func ScenarioRealImmutableHook(t testing.TB, stack *RealArgoCD) (*RealHookApp, time.Time) {
	t.Helper()
	return ScenarioRealImmutableHookWithFinalizers(t, stack)
}

// ScenarioRealImmutableHookWithFinalizers is ScenarioRealImmutableHook where, between the failed first sync and the
// second, the kept failed Job "db-migrate" is given finalizers (when any), as an older Argo CD or another controller
// left them: with HookFinalizer, the Job is what Argo CD v2.14.3 (the only 2.x release that added the hook
// finalizer) leaves on a failed hook it kept, which 2.14.4+ never removes. The second sync starts only once the
// application-controller's cluster cache holds the Job with its finalizers (waitControllerSees): v3.6.1 removes the
// hook finalizer from an existing hook when a sync starts (gitops-engine #770), but from the object its cache holds
// (gitops-engine v3.6.1 pkg/sync/sync_context.go:869-900, 1655-1674): a sync started from a cache without the
// finalizer leaves it (the other outcome a full run saw).
func ScenarioRealImmutableHookWithFinalizers(t testing.TB, stack *RealArgoCD, finalizers ...string) (*RealHookApp, time.Time) {
	t.Helper()
	hook := RealHook{Name: "db-migrate", Hook: synccommon.HookTypePreSync, DeletePolicy: synccommon.HookDeletePolicyHookSucceeded,
		Image: "busybox:1.36", Run: PodFails}
	app := NewRealHookApp(t, stack, "immutable-hook", ConfigMapData{}, hook)
	app.Sync(t)
	if got, ok := app.WaitApp(t, 2*time.Minute, OperationCompleted); !ok || got.Status.OperationState.Phase != synccommon.OperationFailed {
		t.Fatalf("testenv: the first sync of %s did not fail on its hook within 2m: %s", app.Name, DescribeOperation(got))
	}
	if len(finalizers) > 0 {
		app.SetJobFinalizers(t, hook.Name, finalizers...)
		app.waitControllerSees(t, hook.Name)
	}
	hook.Image, hook.Run = "busybox:1.37", PodSucceeds
	app.Update(t, ConfigMapData{}, hook)
	start := time.Now()
	app.Sync(t)
	return app, start
}

// ForeignFinalizer is the finalizer ScenarioRealHookHeldByForeignFinalizer puts on the old hook, as a policy engine
// or a backup tool does.
const ForeignFinalizer = "audit.example.com/retain"

// ScenarioRealHookHeldByForeignFinalizer: a PreSync hook Job with the default delete policy (BeforeHookCreation)
// runs and succeeds in a first sync; another controller then adds its own finalizer to the finished Job (the test
// plays that controller, as it plays the kubelet); a second sync starts. The real application-controller deletes
// the old hook before creating the new one and waits for it to go, which the foreign finalizer prevents. It returns
// after starting the second sync, with the time it started. ReleaseForeignFinalizer ends the hold.
func ScenarioRealHookHeldByForeignFinalizer(t testing.TB, stack *RealArgoCD) (*RealHookApp, time.Time) {
	t.Helper()
	app := NewRealHookApp(t, stack, "held-hook", ConfigMapData{},
		RealHook{Name: "migrate", Hook: synccommon.HookTypePreSync, Run: PodSucceeds})
	app.Sync(t)
	if got, ok := app.WaitApp(t, 2*time.Minute, OperationCompleted); !ok || got.Status.OperationState.Phase != synccommon.OperationSucceeded {
		t.Fatalf("testenv: the first sync of %s did not succeed within 2m: %s", app.Name, DescribeOperation(got))
	}
	app.setForeignFinalizer(t, true)
	start := time.Now()
	app.Sync(t)
	return app, start
}

// ReleaseForeignFinalizer removes ScenarioRealHookHeldByForeignFinalizer's finalizer from the old hook Job, as its
// controller would once done.
func (a *RealHookApp) ReleaseForeignFinalizer(t testing.TB) { a.setForeignFinalizer(t, false) }

func (a *RealHookApp) setForeignFinalizer(t testing.TB, on bool) {
	t.Helper()
	key := client.ObjectKey{Namespace: a.Namespace, Name: "migrate"}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job := &batchv1.Job{}
		if err := a.Stack.Env.Client.Get(context.Background(), key, job); err != nil {
			return err
		}
		var keep []string
		for _, f := range job.Finalizers {
			if f != ForeignFinalizer {
				keep = append(keep, f)
			}
		}
		if on {
			keep = append(keep, ForeignFinalizer)
		}
		job.Finalizers = keep
		return a.Stack.Env.Client.Update(context.Background(), job)
	})
	if err != nil {
		t.Fatalf("testenv: setting %s on Job %s to %v: %v", ForeignFinalizer, key, on, err)
	}
}

// ScenarioRealHookWithLeftoverFinalizer: a PreSync hook Job "migrate" with the default delete policy
// (BeforeHookCreation) runs and succeeds in a first sync; the test then puts argocd.argoproj.io/hook-finalizer on
// the finished Job, as Argo CD v2.14.3 (the only 2.x release that added it) leaves it on every hook, and 2.14.4+
// never removes it (argo-cd #22142), or as a leaky 3.0.x (before v3.0.16) leaves it before an upgrade. No operation
// runs. It returns the app.
func ScenarioRealHookWithLeftoverFinalizer(t testing.TB, stack *RealArgoCD) *RealHookApp {
	t.Helper()
	app := NewRealHookApp(t, stack, "leftover-finalizer", ConfigMapData{},
		RealHook{Name: "migrate", Hook: synccommon.HookTypePreSync, Run: PodSucceeds})
	app.Sync(t)
	if got, ok := app.WaitApp(t, 2*time.Minute, OperationCompleted); !ok || got.Status.OperationState.Phase != synccommon.OperationSucceeded {
		t.Fatalf("testenv: the first sync of %s did not succeed within 2m: %s", app.Name, DescribeOperation(got))
	}
	app.SetJobFinalizers(t, "migrate", HookFinalizer)
	return app
}

// SetJobFinalizers replaces the finalizers of the app's Job name with finalizers, in that order, through the
// apiserver (as another controller, or an older Argo CD, does). The apiserver refuses new finalizers on an object
// being deleted.
func (a *RealHookApp) SetJobFinalizers(t testing.TB, name string, finalizers ...string) {
	t.Helper()
	key := client.ObjectKey{Namespace: a.Namespace, Name: name}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job := &batchv1.Job{}
		if err := a.Stack.Env.Client.Get(context.Background(), key, job); err != nil {
			return err
		}
		job.Finalizers = slices.Clone(finalizers)
		return a.Stack.Env.Client.Update(context.Background(), job)
	})
	if err != nil {
		t.Fatalf("testenv: setting the finalizers of Job %s to %v: %v", key, finalizers, err)
	}
}

// ScenarioRealOldHookHeldBy is ScenarioRealHookHeldByForeignFinalizer with the finished hook Job "migrate" given
// finalizers (in that order) before the second sync: with HookFinalizer and ForeignFinalizer, it carries both what
// Argo CD v2.14.3 left and what another controller holds. The real application-controller deletes the old hook
// (BeforeHookCreation) and waits for it to go. It returns after starting the second sync, with the time it started;
// SetJobFinalizers on the deleting Job can only remove finalizers.
func ScenarioRealOldHookHeldBy(t testing.TB, stack *RealArgoCD, finalizers ...string) (*RealHookApp, time.Time) {
	t.Helper()
	app := NewRealHookApp(t, stack, "held-hook", ConfigMapData{},
		RealHook{Name: "migrate", Hook: synccommon.HookTypePreSync, Run: PodSucceeds})
	app.Sync(t)
	if got, ok := app.WaitApp(t, 2*time.Minute, OperationCompleted); !ok || got.Status.OperationState.Phase != synccommon.OperationSucceeded {
		t.Fatalf("testenv: the first sync of %s did not succeed within 2m: %s", app.Name, DescribeOperation(got))
	}
	app.SetJobFinalizers(t, "migrate", finalizers...)
	start := time.Now()
	app.Sync(t)
	return app, start
}

// HookRuns reads from the node's host directory dir (RealHookApp.HostDir) one entry per start of hook Job name's
// container: the Pod name each start wrote (its HOSTNAME), in order. A hook that never started has none. The error
// means the file is unreadable (do not retry).
func HookRuns(dir, name string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, name+".runs"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(data)), nil
}
