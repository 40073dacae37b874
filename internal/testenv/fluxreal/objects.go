package fluxreal

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// HelmRepositoryAPIVersion is the source.toolkit.fluxcd.io version of HelmRepository used here (served by
// source-controller v1.7.3's CRDs).
const HelmRepositoryAPIVersion = "source.toolkit.fluxcd.io/v1"

// RepositoryName is the HelmRepository CreateRepository creates in a namespace.
const RepositoryName = "charts"

// CreateRepository creates HelmRepository "charts" in namespace pointing at r, fetched every 10s (so a chart
// published later is seen within seconds, as with a short interval in a cluster).
func CreateRepository(t testing.TB, env *testenv.Env, namespace string, r *Repo) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": HelmRepositoryAPIVersion, "kind": "HelmRepository",
		"metadata": map[string]any{"name": RepositoryName, "namespace": namespace},
		"spec":     map[string]any{"url": r.URL, "interval": "10s"},
	}}
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("fluxreal: creating HelmRepository %s/%s: %v", namespace, RepositoryName, err)
	}
}

// Release describes a HelmRelease the way a user's manifest would.
type Release struct {
	Name string
	// Chart and Version select the chart in HelmRepository "charts" (Version may be a semver range).
	Chart, Version string
	// DependsOn names HelmReleases of the same namespace.
	DependsOn []string
	// InstallRetries is spec.install.remediation.retries (0: none, as the default).
	InstallRetries int
	// UpgradeRetries is spec.upgrade.remediation.retries.
	UpgradeRetries int
	// Suspend is spec.suspend.
	Suspend bool
	// Timeout is spec.timeout (default 5m, helm-controller's).
	Timeout time.Duration
}

// object renders r as an unstructured HelmRelease of apiVersion.
func (r Release) object(apiVersion, namespace string) *unstructured.Unstructured {
	spec := map[string]any{
		"interval": "10m",
		"chart": map[string]any{"spec": map[string]any{
			"chart": r.Chart, "version": r.Version, "interval": "10s",
			"sourceRef": map[string]any{"kind": "HelmRepository", "name": RepositoryName},
		}},
	}
	if len(r.DependsOn) > 0 {
		var deps []any
		for _, d := range r.DependsOn {
			deps = append(deps, map[string]any{"name": d})
		}
		spec["dependsOn"] = deps
	}
	if r.InstallRetries > 0 {
		spec["install"] = map[string]any{"remediation": map[string]any{"retries": int64(r.InstallRetries)}}
	}
	if r.UpgradeRetries > 0 {
		spec["upgrade"] = map[string]any{"remediation": map[string]any{"retries": int64(r.UpgradeRetries)}}
	}
	if r.Suspend {
		spec["suspend"] = true
	}
	if r.Timeout > 0 {
		spec["timeout"] = r.Timeout.String()
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": helmv2.HelmReleaseKind,
		"metadata": map[string]any{"name": r.Name, "namespace": namespace},
		"spec":     spec,
	}}
}

// CreateRelease creates r in namespace with the stack's helm-controller API version.
func (s *Stack) CreateRelease(t testing.TB, namespace string, r Release) {
	t.Helper()
	if err := s.Env.Client.Create(context.Background(), r.object(s.Helm.APIVersion, namespace)); err != nil {
		t.Fatalf("fluxreal: creating HelmRelease %s/%s: %v", namespace, r.Name, err)
	}
}

// PatchRelease merge-patches the HelmRelease's spec (e.g. {"suspend": true}, a chart version), as `kubectl patch`
// or a Git change applied by Flux would.
func (s *Stack) PatchRelease(t testing.TB, namespace, name string, spec map[string]any) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(s.Helm.APIVersion)
	obj.SetKind(helmv2.HelmReleaseKind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	patch, err := jsonMerge(map[string]any{"spec": spec})
	if err != nil {
		t.Fatalf("fluxreal: %v", err)
	}
	if err := s.Env.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("fluxreal: patching HelmRelease %s/%s: %v", namespace, name, err)
	}
}

// Get reads a HelmRelease through the stack's API version into the v2 Go type (the status fields this package
// reads have the same shape in v2beta2 and v2).
func (s *Stack) Get(t testing.TB, namespace, name string) *helmv2.HelmRelease {
	t.Helper()
	hr, err := s.get(namespace, name)
	if err != nil {
		t.Fatalf("fluxreal: reading HelmRelease %s/%s: %v", namespace, name, err)
	}
	return hr
}

func (s *Stack) get(namespace, name string) (*helmv2.HelmRelease, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(s.Helm.APIVersion)
	u.SetKind(helmv2.HelmReleaseKind)
	if err := s.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, u); err != nil {
		return nil, err
	}
	hr := &helmv2.HelmRelease{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, hr); err != nil {
		return nil, err
	}
	return hr, nil
}

// WaitFor polls the HelmRelease until cond holds, failing with the last status after timeout.
func (s *Stack) WaitFor(t testing.TB, namespace, name string, timeout time.Duration, what string, cond func(*helmv2.HelmRelease) bool) *helmv2.HelmRelease {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		hr, err := s.get(namespace, name)
		if err == nil && cond(hr) {
			return hr
		}
		if time.Now().After(deadline) {
			t.Fatalf("fluxreal: HelmRelease %s/%s: not %s within %s; last status: %s (error %v)", namespace, name, what, timeout, Describe(hr), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Describe renders the parts of a HelmRelease's status the scenarios are about, for messages and the
// conformance matrix.
func Describe(hr *helmv2.HelmRelease) string {
	if hr == nil {
		return "absent"
	}
	s := fmt.Sprintf("generation %d, observedGeneration %d", hr.Generation, hr.Status.ObservedGeneration)
	for _, c := range hr.Status.Conditions {
		s += fmt.Sprintf("; %s=%s %s %q", c.Type, c.Status, c.Reason, c.Message)
	}
	if hr.Status.InstallFailures > 0 || hr.Status.UpgradeFailures > 0 {
		s += fmt.Sprintf("; installFailures %d, upgradeFailures %d", hr.Status.InstallFailures, hr.Status.UpgradeFailures)
	}
	if len(hr.Status.History) > 0 {
		s += fmt.Sprintf("; history %d entries", len(hr.Status.History))
	}
	return s
}

// Condition returns the condition of type typ, or nil.
func Condition(hr *helmv2.HelmRelease, typ string) *metav1.Condition {
	for i := range hr.Status.Conditions {
		if hr.Status.Conditions[i].Type == typ {
			return &hr.Status.Conditions[i]
		}
	}
	return nil
}

// IsReady reports Ready=True at the current generation: what helm-controller's dependency check asks of a dependency.
func IsReady(hr *helmv2.HelmRelease) bool {
	c := Condition(hr, meta.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionTrue && hr.Status.ObservedGeneration == hr.Generation
}

// HasReason reports condition typ with status and reason.
func HasReason(hr *helmv2.HelmRelease, typ string, status metav1.ConditionStatus, reason string) bool {
	c := Condition(hr, typ)
	return c != nil && c.Status == status && c.Reason == reason
}

// CreateNamespace creates namespace name (ignoring AlreadyExists): e.g. the namespace a FailingChart needs.
func CreateNamespace(t testing.TB, env *testenv.Env, name string) {
	t.Helper()
	err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("fluxreal: creating namespace %s: %v", name, err)
	}
}

func jsonMerge(v map[string]any) ([]byte, error) { return json.Marshal(v) }
