package flux

import (
	"context"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
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
