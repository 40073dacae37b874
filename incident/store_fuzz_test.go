package incident

import (
	"testing"
)

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
