package fluxreal

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// KustomizeControllerVersion is the kustomize-controller release built by hack/flux-tools.sh and run beside
// source-controller when Options.Kustomize is set.
const KustomizeControllerVersion = "v1.7.3"

// KustomizationAPIVersion is the kustomize.toolkit.fluxcd.io version the tests create Kustomizations with (the
// storage version of v1.7.3's CRD).
const KustomizationAPIVersion = "kustomize.toolkit.fluxcd.io/v1"

// GitRepositoryAPIVersion is the source.toolkit.fluxcd.io version of GitRepository used here.
const GitRepositoryAPIVersion = "source.toolkit.fluxcd.io/v1"

const kustomizeBinary = "kustomize-controller-" + KustomizeControllerVersion

// KustomizeCRDDir is the bin/ directory of kustomize-controller's Kustomization CRD.
const KustomizeCRDDir = "crds-kustomize-controller-" + KustomizeControllerVersion

// KustomizationGVK is the GroupVersionKind of the Kustomizations the tests create.
var KustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}

// startKustomizeController starts kustomize-controller v1.7.3 with the stack's events address and requeue options
// (the CRDs are installed by start).
func (s *Stack) startKustomizeController() error {
	args := []string{"--enable-leader-election=false", "--log-encoding=console", "--concurrent=4", "--no-remote-bases=true"}
	if s.EventsAddr != "" {
		args = append(args, "--events-addr=http://"+s.EventsAddr+"/")
	}
	if s.opts.RequeueDependency > 0 {
		args = append(args, "--requeue-dependency="+s.opts.RequeueDependency.String())
	}
	c, err := runController(s.Env, s.opts, kustomizeBinary, args)
	if err != nil {
		return err
	}
	s.Kustomize = c
	return nil
}

// PauseKustomizeController stops kustomize-controller where it is (SIGSTOP), like PauseHelmController.
func (s *Stack) PauseKustomizeController(t testing.TB) (resume func()) {
	t.Helper()
	return pause(t, s.Kustomize)
}

// GitServer serves a testenv.GitRepo over git's smart HTTP protocol (git http-backend), the way source-controller
// clones a GitRepository (it accepts only http, https and ssh URLs, not file://).
type GitServer struct {
	// Repo is the repository served; commit to it and source-controller fetches the new revision.
	Repo *testenv.GitRepo
	// URL is the clone URL of Repo.
	URL string
}

// NewGitServer creates a git repository and serves it over HTTP until t ends.
func NewGitServer(t testing.TB) *GitServer {
	t.Helper()
	repo := testenv.NewGitRepo(t)
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("fluxreal: %v", err)
	}
	root := filepath.Dir(repo.Dir)
	h := &cgi.Handler{Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}}
	srv := httptest.NewServer(http.StripPrefix("/git", h))
	t.Cleanup(srv.Close)
	return &GitServer{Repo: repo, URL: srv.URL + "/git/" + filepath.Base(repo.Dir)}
}

// GitRepositoryName is the GitRepository CreateGitRepository creates in a namespace.
const GitRepositoryName = "repo"

// CreateGitRepository creates GitRepository "repo" in namespace pointing at g's branch main, fetched every
// interval, and waits until source-controller serves its first artifact. A Kustomization created before that is
// told "Source artifact not found, retrying in 30s" by kustomize-controller: that requeue stays queued after the
// artifact arrives and fires 30s later, in phase with a dependent's 30s dependency re-check, and a re-check that
// meets its dependency mid-reconcile (Ready=Unknown) waits another 30s (a fresh-clone make test saw apps wait 60s).
func CreateGitRepository(t testing.TB, env *testenv.Env, namespace string, g *GitServer, interval time.Duration) {
	t.Helper()
	defer waitGitRepositoryArtifact(t, env, namespace, 90*time.Second)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GitRepositoryAPIVersion, "kind": "GitRepository",
		"metadata": map[string]any{"name": GitRepositoryName, "namespace": namespace},
		"spec": map[string]any{"url": g.URL, "interval": interval.String(),
			"ref": map[string]any{"branch": "main"}, "timeout": "20s"},
	}}
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("fluxreal: creating GitRepository %s/%s: %v", namespace, GitRepositoryName, err)
	}
}

// waitGitRepositoryArtifact waits until GitRepository "repo" in namespace has status.artifact.revision.
func waitGitRepositoryArtifact(t testing.TB, env *testenv.Env, namespace string, timeout time.Duration) {
	t.Helper()
	if t.Failed() {
		return
	}
	deadline := time.Now().Add(timeout)
	for {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(GitRepositoryAPIVersion)
		u.SetKind("GitRepository")
		err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: GitRepositoryName}, u)
		if err == nil {
			if rev, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "revision"); rev != "" {
				return
			}
		}
		if time.Now().After(deadline) {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			t.Fatalf("fluxreal: GitRepository %s/%s has no artifact within %s (get: %v); conditions: %v", namespace, GitRepositoryName, timeout, err, conds)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Kustomization describes a Flux Kustomization the way a user's manifest would (source: GitRepository "repo").
type Kustomization struct {
	Name string
	// Path is spec.path in the repository.
	Path string
	// DependsOn names Kustomizations of the same namespace.
	DependsOn []string
	// Interval is spec.interval (default 1m); RetryInterval is spec.retryInterval (0: unset).
	Interval, RetryInterval time.Duration
	// Timeout is spec.timeout (0: unset, the interval).
	Timeout time.Duration
	// Wait is spec.wait (health-check every applied object).
	Wait bool
	// Prune is spec.prune.
	Prune bool
	// TargetNamespace is spec.targetNamespace ("" : the manifests' own).
	TargetNamespace string
	// Suspend is spec.suspend.
	Suspend bool
	// Force is spec.force (recreate an object whose apply an immutable field refuses).
	Force bool
}

func (k Kustomization) object(namespace string) *unstructured.Unstructured {
	interval := k.Interval
	if interval == 0 {
		interval = time.Minute
	}
	spec := map[string]any{
		"interval": interval.String(), "path": k.Path, "prune": k.Prune, "wait": k.Wait, "suspend": k.Suspend,
		"sourceRef": map[string]any{"kind": "GitRepository", "name": GitRepositoryName},
	}
	if k.RetryInterval > 0 {
		spec["retryInterval"] = k.RetryInterval.String()
	}
	if k.Force {
		spec["force"] = true
	}
	if k.Timeout > 0 {
		spec["timeout"] = k.Timeout.String()
	}
	if k.TargetNamespace != "" {
		spec["targetNamespace"] = k.TargetNamespace
	}
	if len(k.DependsOn) > 0 {
		var deps []any
		for _, d := range k.DependsOn {
			deps = append(deps, map[string]any{"name": d})
		}
		spec["dependsOn"] = deps
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": KustomizationAPIVersion, "kind": "Kustomization",
		"metadata": map[string]any{"name": k.Name, "namespace": namespace},
		"spec":     spec,
	}}
}

// CreateKustomization creates k in namespace.
func (s *Stack) CreateKustomization(t testing.TB, namespace string, k Kustomization) {
	t.Helper()
	if err := s.Env.Client.Create(context.Background(), k.object(namespace)); err != nil {
		t.Fatalf("fluxreal: creating Kustomization %s/%s: %v", namespace, k.Name, err)
	}
}

// GetKustomization reads Kustomization namespace/name.
func (s *Stack) GetKustomization(t testing.TB, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(KustomizationGVK)
	if err := s.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, u); err != nil {
		t.Fatalf("fluxreal: reading Kustomization %s/%s: %v", namespace, name, err)
	}
	return u
}

// WaitForKustomization polls Kustomization namespace/name until cond holds, failing t with what and the object's
// conditions after timeout.
func (s *Stack) WaitForKustomization(t testing.TB, namespace, name string, timeout time.Duration, what string, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		u := s.GetKustomization(t, namespace, name)
		if cond(u) {
			return u
		}
		if time.Now().After(deadline) {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			t.Fatalf("fluxreal: Kustomization %s/%s: %s not reached within %s; conditions: %v", namespace, name, what, timeout, conds)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// KustomizationCondition returns status, reason and message of u's condition typ ("" when absent).
func KustomizationCondition(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
	}
	return "", "", ""
}

// RestartKustomizeController stops kustomize-controller and starts it again (as a Pod restart or a Flux upgrade
// would): the new process starts with empty caches, its REST mapper included.
func (s *Stack) RestartKustomizeController() error {
	if s.Kustomize != nil {
		s.Kustomize.Stop()
	}
	return s.startKustomizeController()
}

// DeleteKustomization deletes Kustomization namespace/name (kustomize-controller's finalizer then prunes its
// inventory when spec.prune is true).
func (s *Stack) DeleteKustomization(t testing.TB, namespace, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(KustomizationGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	if err := s.Env.Client.Delete(context.Background(), u); err != nil {
		t.Fatalf("fluxreal: deleting Kustomization %s/%s: %v", namespace, name, err)
	}
}

// KustomizationReady reports whether u is Ready=True at its generation.
func KustomizationReady(u *unstructured.Unstructured) bool {
	status, _, _ := KustomizationCondition(u, "Ready")
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return status == "True" && observed == u.GetGeneration()
}

// PatchKustomization merge-patches Kustomization namespace/name's spec with spec.
func (s *Stack) PatchKustomization(t testing.TB, namespace, name string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(KustomizationGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	patch, err := jsonMerge(map[string]any{"spec": spec})
	if err != nil {
		t.Fatalf("fluxreal: %v", err)
	}
	if err := s.Env.Client.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("fluxreal: patching Kustomization %s/%s: %v", namespace, name, err)
	}
}
