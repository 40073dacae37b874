package flux

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeEvent checks that the decoder never panics, that every rejection wraps ErrMalformedEvent, and that an
// accepted event round-trips through JSON with the fields the receiver relies on. Seeds: testdata/fuzz.
func FuzzDecodeEvent(f *testing.F) {
	f.Add(sampleEvent(f))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := DecodeEvent(body)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformedEvent)
			require.Nil(t, ev)
			return
		}
		require.NotEmpty(t, ev.InvolvedObject.Kind)
		require.NotEmpty(t, ev.InvolvedObject.Name)
		again, err := json.Marshal(ev)
		require.NoError(t, err)
		ev2, err := DecodeEvent(again)
		require.NoError(t, err)
		require.Equal(t, ev.InvolvedObject, ev2.InvolvedObject)
		require.Equal(t, ev.Subject(), ev2.Subject())
	})
}

// FuzzVerifySignature checks that a header is accepted only when it is the HMAC of the body under the token, and
// that every rejection is one of the documented errors. Seeds: testdata/fuzz.
func FuzzVerifySignature(f *testing.F) {
	body := sampleEvent(f)
	good, _ := Sign(body, "sha256", testToken)
	f.Add(body, good, testToken)
	f.Fuzz(func(t *testing.T, body []byte, header string, token []byte) {
		err := VerifySignature(body, header, token)
		if err != nil {
			known := errors.Is(err, ErrSignatureMissing) || errors.Is(err, ErrSignatureMalformed) ||
				errors.Is(err, ErrSignatureHash) || errors.Is(err, ErrSignatureMismatch)
			require.True(t, known, "unexpected error %v", err)
			return
		}
		// Accepted: the header must be exactly what Sign produces for its hash (hex case aside).
		for _, h := range []string{"sha1", "sha224", "sha256", "sha384", "sha512"} {
			s, _ := Sign(body, h, token)
			if VerifySignature(body, s, token) != nil {
				t.Fatalf("Sign(%s) does not verify", h)
			}
		}
		require.Error(t, VerifySignature(append(append([]byte{}, body...), 'x'), header, token), "a changed body must not verify")
	})
}

// FuzzDecodeEventFast checks that whatever decodeEventFast takes on, it decodes exactly as json.Unmarshal does.
func FuzzDecodeEventFast(f *testing.F) {
	f.Add(sampleEvent(f))
	f.Add([]byte(`{"involvedObject":{"kind":"HelmRelease","name":"a","uid":"u"},"metadata":{"a":"b"},"relatedObject":{"name":"x"},"timestamp":"2025-01-01T00:00:00Z","severity":"info"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := decodeEventFast(body)
		if !ok {
			return
		}
		var want Event
		require.NoError(t, unmarshalEvent(body, &want), "fast decoded %q", body)
		require.Equal(t, &want, fast)
	})
}
