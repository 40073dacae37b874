package testenv

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmv2beta1 "github.com/fluxcd/helm-controller/api/v2beta1"
	helmv2beta2 "github.com/fluxcd/helm-controller/api/v2beta2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	argov1alpha1 "github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// Scheme returns a new scheme with everything Env.Client knows: client-go's built-in groups (core, apps, batch,
// admissionregistration, discovery, coordination, ...), apiextensions v1, Argo CD v1alpha1 and helm-controller
// v2, v2beta2 and v2beta1.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		argov1alpha1.AddToScheme,
		helmv2.AddToScheme,
		helmv2beta2.AddToScheme,
		helmv2beta1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}
