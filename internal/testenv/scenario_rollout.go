package testenv

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// RolloutStuckApp is the step of RealRollout whose Application never becomes healthy.
const RolloutStuckApp = "stuck"

// rolloutSteps are RealRollout's Applications in step order, with what each one's directory in git holds: a
// ConfigMap (Healthy once synced), a Deployment whose Pod never becomes Ready — the played kubelet leaves it Pending,
// a real node cannot pull its image (nothing is pulled there) — so the app stays Progressing (progressDeadlineSeconds
// is long), and another ConfigMap.
var rolloutSteps = []struct{ name, manifest string }{
	{"first", rolloutConfigMap("first-settings")},
	{RolloutStuckApp, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: stuck-web
spec:
  replicas: 1
  progressDeadlineSeconds: 3600
  selector:
    matchLabels: {app: stuck-web}
  template:
    metadata:
      labels: {app: stuck-web}
    spec:
      containers:
      - name: web
        image: registry.testenv.invalid/web:1
`},
	{"last", rolloutConfigMap("last-settings")},
}

func rolloutConfigMap(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  key: value\n"
}

// RealRollout is an ApplicationSet rolled out in three RollingSync steps by the real applicationset-controller
// (StartApplicationSetController), one Application per step: "first", "stuck" (never healthy), "last".
type RealRollout struct {
	Stack *RealArgoCD
	Repo  *GitRepo
	// Name is the ApplicationSet's; its Applications are Name-first, Name-stuck, Name-last, labelled
	// app.kubernetes.io/part-of=Name (Selector).
	Name      string
	Namespace string
}

// App returns the name of the Application of step ("first", RolloutStuckApp, "last").
func (r *RealRollout) App(step string) string { return r.Name + "-" + step }

// Selector matches the rollout's Applications only.
func (r *RealRollout) Selector() string { return "app.kubernetes.io/part-of=" + r.Name }

// ScenarioRealRollingSync commits the three directories, creates the ApplicationSet (list generator, RollingSync
// with one step per Application; maxUpdate 0 on step 2 when holdStep2, which stops the rollout there on purpose),
// and returns once the controller recorded step 1 Healthy and step 2 Progressing (or, with holdStep2, Waiting).
func ScenarioRealRollingSync(t testing.TB, stack *RealArgoCD, name string, holdStep2 bool) *RealRollout {
	t.Helper()
	stack.StartApplicationSetController(t)
	r := &RealRollout{Stack: stack, Repo: NewGitRepo(t), Name: uniqueName(name), Namespace: stack.Env.Namespace(t)}
	var elements []apiextensionsv1.JSON
	var steps []v1alpha1.ApplicationSetRolloutStep
	for _, s := range rolloutSteps {
		r.Repo.Write(t, s.name+"/manifest.yaml", s.manifest)
		elements = append(elements, apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(`{"step":%q}`, s.name))})
		steps = append(steps, v1alpha1.ApplicationSetRolloutStep{MatchExpressions: []v1alpha1.ApplicationMatchExpression{
			{Key: "step", Operator: "In", Values: []string{s.name}}}})
	}
	if holdStep2 {
		zero := intstr.FromInt32(0)
		steps[1].MaxUpdate = &zero
	}
	r.Repo.Commit(t, "rollout "+r.Name)
	as := &v1alpha1.ApplicationSet{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: stack.Namespace},
		Spec: v1alpha1.ApplicationSetSpec{
			GoTemplate:        true,
			GoTemplateOptions: []string{"missingkey=error"},
			Generators:        []v1alpha1.ApplicationSetGenerator{{List: &v1alpha1.ListGenerator{Elements: elements}}},
			Strategy:          &v1alpha1.ApplicationSetStrategy{Type: "RollingSync", RollingSync: &v1alpha1.ApplicationSetRolloutStrategy{Steps: steps}},
			Template: v1alpha1.ApplicationSetTemplate{
				ApplicationSetTemplateMeta: v1alpha1.ApplicationSetTemplateMeta{Name: r.Name + "-{{.step}}",
					Labels: map[string]string{"step": "{{.step}}", "app.kubernetes.io/part-of": r.Name}},
				Spec: v1alpha1.ApplicationSpec{
					Project:     v1alpha1.DefaultAppProjectName,
					Source:      &v1alpha1.ApplicationSource{RepoURL: r.Repo.URL, Path: "{{.step}}", TargetRevision: "main"},
					Destination: v1alpha1.ApplicationDestination{Server: v1alpha1.KubernetesInternalAPIServerAddr, Namespace: r.Namespace},
				},
			},
		},
	}
	if err := stack.Env.Client.Create(context.Background(), as); err != nil {
		t.Fatalf("testenv: creating ApplicationSet %s: %v", r.Name, err)
	}
	// The stack outlives the test: delete the ApplicationSet (its Applications go with it, by their owner
	// references) so no later test of the binary, serve's included, sees a rollout stalled since.
	t.Cleanup(func() { _ = stack.Env.Client.Delete(context.Background(), as) })
	want := RolloutProgressing
	if holdStep2 {
		want = RolloutWaiting
	}
	if got, ok := r.WaitStatus(t, 4*time.Minute, func(e map[string]v1alpha1.ApplicationSetApplicationStatus) bool {
		return e[r.App("first")].Status == RolloutHealthy && e[r.App(RolloutStuckApp)].Status == want && e[r.App("last")].Status == RolloutWaiting
	}); !ok {
		t.Fatalf("testenv: the rollout of %s did not reach step 1 Healthy, step 2 %s, step 3 Waiting within 4m: %s", r.Name, want, DescribeRollout(got))
	}
	return r
}

// The statuses the applicationset-controller records for each Application of a RollingSync.
const (
	RolloutWaiting     = "Waiting"
	RolloutProgressing = "Progressing"
	RolloutHealthy     = "Healthy"
)

// Get reads the ApplicationSet from the apiserver.
func (r *RealRollout) Get(t testing.TB) *v1alpha1.ApplicationSet {
	t.Helper()
	as := &v1alpha1.ApplicationSet{}
	if err := r.Stack.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: r.Stack.Namespace, Name: r.Name}, as); err != nil {
		t.Fatalf("testenv: reading ApplicationSet %s: %v", r.Name, err)
	}
	return as
}

// WaitStatus polls the ApplicationSet until cond holds for its status entries (by Application) or d passes; it
// returns the last ApplicationSet read and whether cond held.
func (r *RealRollout) WaitStatus(t testing.TB, d time.Duration, cond func(map[string]v1alpha1.ApplicationSetApplicationStatus) bool) (*v1alpha1.ApplicationSet, bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		as := r.Get(t)
		if cond(Entries(as)) {
			return as, true
		}
		if time.Now().After(deadline) {
			return as, false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Entries indexes an ApplicationSet's status.applicationStatus by Application.
func Entries(as *v1alpha1.ApplicationSet) map[string]v1alpha1.ApplicationSetApplicationStatus {
	m := map[string]v1alpha1.ApplicationSetApplicationStatus{}
	for _, e := range as.Status.ApplicationStatus {
		m[e.Application] = e
	}
	return m
}

// DescribeRollout renders an ApplicationSet's entries for failure messages and conformance rows: "app step N
// Status (message)" for each, in name order; a Waiting entry without its message (see below).
func DescribeRollout(as *v1alpha1.ApplicationSet) string {
	if as == nil {
		return "no ApplicationSet"
	}
	entries := slices.Clone(as.Status.ApplicationStatus)
	slices.SortFunc(entries, func(a, b v1alpha1.ApplicationSetApplicationStatus) int {
		return strings.Compare(a.Application, b.Application)
	})
	s := ""
	for i, e := range entries {
		if i > 0 {
			s += "; "
		}
		s += fmt.Sprintf("%s step %s %s", e.Application, e.Step, e.Status)
		// A Waiting entry's message says which of the controller's passes wrote it last ("No Application status
		// found" or "Application has pending changes"), which is timing, not state.
		if e.Status != "Waiting" {
			s += " (" + e.Message + ")"
		}
	}
	if s == "" {
		return "no status.applicationStatus"
	}
	return s
}
