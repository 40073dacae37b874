package flux

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultControllerDeployment is where Flux installs helm-controller.
var DefaultControllerDeployment = types.NamespacedName{Namespace: "flux-system", Name: "helm-controller"}

// versionTTL is how long a read of the helm-controller version (or its failure) is reused.
const versionTTL = 5 * time.Minute

// versionReader reads helm-controller's version from its Deployment's image tag, best effort: a missing
// Deployment or a forbidden read only means the findings carry no version advisory.
type versionReader struct {
	c   client.Reader
	key types.NamespacedName

	mu    sync.Mutex
	value string
	at    time.Time
}

func (v *versionReader) get(ctx context.Context, now time.Time) string {
	if v == nil || v.c == nil {
		return ""
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.at.IsZero() && now.Sub(v.at) < versionTTL {
		return v.value
	}
	v.at, v.value = now, ""
	d := &appsv1.Deployment{}
	if err := v.c.Get(ctx, v.key, d); err == nil {
		for _, c := range d.Spec.Template.Spec.Containers {
			if strings.Contains(c.Image, "helm-controller") || len(d.Spec.Template.Spec.Containers) == 1 {
				v.value = imageTag(c.Image)
				break
			}
		}
	}
	return v.value
}

// imageTag returns the tag of an image reference ("ghcr.io/fluxcd/helm-controller:v0.36.2@sha256:…" → "v0.36.2"),
// or "" when it has none.
func imageTag(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon <= slash {
		return ""
	}
	return image[colon+1:]
}

// ReleaseAPIVersions are the HelmRelease API versions the watcher reads, newest first: v2 (Flux ≥ 2.3), v2beta2
// (Flux 2.2, helm-controller v0.37, which serves v2beta2 and v2beta1 only) and v2beta1 (Flux ≤ 2.1).
var ReleaseAPIVersions = []string{"v2", "v2beta2", "v2beta1"}

// ErrNoHelmReleaseAPI says the cluster serves none of ReleaseAPIVersions: Flux's helm-controller is not installed,
// so nothing about HelmReleases can be known (which is not the same as nothing being stuck).
var ErrNoHelmReleaseAPI = errors.New("the cluster serves no HelmRelease API (helm.toolkit.fluxcd.io v2, v2beta2 or v2beta1): is Flux's helm-controller installed?")

// NewestServed returns the newest of ReleaseAPIVersions among served, or "" when none is.
func NewestServed(served []string) string {
	for _, v := range ReleaseAPIVersions {
		if slices.Contains(served, v) {
			return v
		}
	}
	return ""
}

// ServedAPIVersion asks the apiserver's discovery which HelmRelease API versions it serves and returns the newest
// of ReleaseAPIVersions, or ErrNoHelmReleaseAPI when it serves none of them.
func ServedAPIVersion(cfg *rest.Config) (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("flux: %w", err)
	}
	return servedAPIVersion(dc)
}

func servedAPIVersion(dc discovery.ServerResourcesInterface) (string, error) {
	for _, v := range ReleaseAPIVersions { // newest first
		gv := schema.GroupVersion{Group: helmv2.GroupVersion.Group, Version: v}
		list, err := dc.ServerResourcesForGroupVersion(gv.String())
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return "", fmt.Errorf("flux: discovering %s: %w", gv, err)
		}
		for _, r := range list.APIResources {
			if r.Kind == helmv2.HelmReleaseKind && !strings.Contains(r.Name, "/") {
				return v, nil
			}
		}
	}
	return "", ErrNoHelmReleaseAPI
}
