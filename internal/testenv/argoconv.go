package testenv

import (
	"encoding/json"
	"fmt"

	upstream "github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"

	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// ConvertArgo copies an Argo CD API object between Argo CD's own Go types (which the in-process argocd-server, its
// cache and clientset use) and syncmedic's generated copy of them (internal/argoapi), through their JSON form: both
// are generated from the same API, field for field. It panics on an object that does not convert: a bug in a test.
func ConvertArgo[Out any](in any) *Out {
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("testenv: converting %T: %v", in, err))
	}
	out := new(Out)
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("testenv: converting %T to %T: %v", in, out, err))
	}
	return out
}

// ArgoApplication returns the Application an event of Argo CD's clientset carries (Argo CD's type) as syncmedic's
// copy; false for anything else (a watch's Status, say).
func ArgoApplication(obj any) (*v1alpha1.Application, bool) {
	app, ok := obj.(*upstream.Application)
	if !ok || app == nil {
		return nil, false
	}
	return ConvertArgo[v1alpha1.Application](app), true
}
