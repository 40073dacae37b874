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

// FuzzDecodeSilences checks that corrupt stored silences are an error, never a panic, and that what decodes
// encodes again.
func FuzzDecodeSilences(f *testing.F) {
	f.Add([]byte(`{"version":1,"silences":[{"id":"s1","matchers":[{"name":"app","value":"shop-.*","isRegex":true}],"startsAt":"2026-03-10T12:00:00Z","endsAt":"2026-03-10T14:00:00Z","createdBy":"alice","comment":"c"}]}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ss, err := DecodeSilences(b)
		if err != nil {
			return
		}
		for i := range ss {
			_ = ss[i].Validate() // a stored silence that does not validate is dropped by the tracker, never a panic
		}
		if _, err := encodeSilences(ss); err != nil {
			t.Fatalf("decoded silences do not encode again: %v", err)
		}
	})
}
