package policy

import (
	"os"
	"testing"

	"github.com/syncmedic/syncmedic"
)

// FuzzLoadPolicy checks that no policy text panics the loader, and that an accepted policy is valid and decides.
func FuzzLoadPolicy(f *testing.F) {
	if b, err := os.ReadFile("../examples/policy.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("killSwitch: true\n"))
	f.Add([]byte("rules:\n  argocd/operation-stuck:\n    mode: auto\n    namespaces: ['[']\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := LoadPolicy(b)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("LoadPolicy accepted an invalid policy: %v", err)
		}
		for _, r := range syncmedic.Rules() {
			f := syncmedic.NewFinding(r.ID, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Kind: "Job", Namespace: "shop", Name: "x", Project: "default"}, "s")
			f.Remedy = syncmedic.Remedy{Action: syncmedic.ActionTerminateAndResync, AutoSafe: true}
			_ = p.Decide(f)
		}
	})
}
