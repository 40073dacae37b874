package syncmedic

import (
	"os"
	"testing"
)

// FuzzLoadPolicy checks that no policy text panics the loader, and that an accepted policy is valid and decides.
func FuzzLoadPolicy(f *testing.F) {
	if b, err := os.ReadFile("examples/policy.yaml"); err == nil {
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
		for _, r := range Rules() {
			f := NewFinding(r.ID, ObjectRef{Tool: ToolArgoCD, Kind: "Job", Namespace: "shop", Name: "x", Project: "default"}, "s")
			f.Remedy = Remedy{Action: ActionTerminateAndResync, AutoSafe: true}
			_ = p.Decide(f)
		}
	})
}

// FuzzDecodeStore checks that a corrupt state ConfigMap or file is an error, never a panic.
func FuzzDecodeStore(f *testing.F) {
	f.Add([]byte(`{"version":1,"incidents":[{"id":"a-1","fingerprint":"a","state":"firing","finding":{"rule":"argocd/operation-stuck","severity":"warning","object":{"tool":"argocd","kind":"Application","name":"shop"},"summary":"s","evidence":[],"remedy":{"autoSafe":false},"fingerprint":"a"},"openedAt":"2026-03-10T12:00:00Z","updatedAt":"2026-03-10T12:00:00Z","notes":{"slack.ts":"1.2"}}]}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		incs, err := decodeStore(b)
		if err != nil {
			return
		}
		if _, err := encodeStore(incs); err != nil {
			t.Fatalf("a decoded store does not encode again: %v", err)
		}
	})
}
