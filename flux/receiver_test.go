package flux

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	eventv1beta1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var testToken = []byte("s3cr3t-hmac-token")

// sampleTime is sampleEvent's timestamp; sampleNow, five minutes later, is when the tests' receivers receive it.
var (
	sampleTime = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	sampleNow  = func() time.Time { return sampleTime.Add(5 * time.Minute) }
)

func sampleEvent(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(eventv1beta1.Event{
		InvolvedObject: corev1.ObjectReference{APIVersion: "helm.toolkit.fluxcd.io/v2", Kind: "HelmRelease", Namespace: "apps", Name: "redis"},
		Severity:       eventv1beta1.EventSeverityError, Timestamp: metav1.NewTime(sampleTime),
		Message: "dependency 'apps/postgres' is not ready", Reason: "DependencyNotReady", ReportingController: "helm-controller",
	})
	require.NoError(t, err)
	return b
}

func signed(t testing.TB, hash string, body []byte) string {
	t.Helper()
	s, err := Sign(body, hash, testToken)
	require.NoError(t, err)
	return s
}

func TestReceiverResponses(t *testing.T) {
	body := sampleEvent(t)
	v1Body := []byte(`{"involvedObject":{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","namespace":"apps","name":"redis"},` +
		`"relatedObject":{"kind":"HelmChart","namespace":"flux-system","name":"apps-redis"},"action":"Upgrading","severity":"info",` +
		`"timestamp":"2026-03-10T12:00:00Z","message":"Helm upgrade succeeded","reason":"UpgradeSucceeded","reportingController":"helm-controller","futureField":{"x":1}}`)
	tests := []struct {
		name      string
		method    string
		body      []byte
		signature func(body []byte) string
		// contentType is sent as Content-Type; empty sends application/json, "-" sends none.
		contentType string
		maxBody     int64
		queueSize   int
		prefill     int
		wantCode    int
		wantResult  string
		wantBody    string
		wantHeader  map[string]string
	}{
		{name: "an event without a Content-Type is accepted", body: body, contentType: "-", signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 202, wantResult: ResultAccepted},
		{name: "a v1beta1 event signed with sha256 is accepted", body: body, signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 202, wantResult: ResultAccepted},
		{name: "a v1 event with relatedObject, action and unknown fields is accepted", body: v1Body, signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 202, wantResult: ResultAccepted},
		{name: "an event signed with sha1 is accepted", body: body, signature: func(b []byte) string { return signed(t, "sha1", b) }, wantCode: 202, wantResult: ResultAccepted},
		{name: "an event signed with sha224 is accepted", body: body, signature: func(b []byte) string { return signed(t, "sha224", b) }, wantCode: 202, wantResult: ResultAccepted},
		{name: "an event signed with sha384 is accepted", body: body, signature: func(b []byte) string { return signed(t, "sha384", b) }, wantCode: 202, wantResult: ResultAccepted},
		{name: "an event signed with sha512 is accepted", body: body, signature: func(b []byte) string { return signed(t, "sha512", b) }, wantCode: 202, wantResult: ResultAccepted},
		{name: "an event without a signature is unauthorized", body: body, wantCode: 401, wantResult: ResultUnauthorized, wantBody: "missing X-Signature"},
		{name: "an event signed with another token is unauthorized", body: body,
			signature: func(b []byte) string { s, _ := Sign(b, "sha256", []byte("other")); return s }, wantCode: 401, wantResult: ResultUnauthorized, wantBody: "does not match"},
		{name: "a signature of a different body is unauthorized", body: body,
			signature: func(b []byte) string { return signed(t, "sha256", append([]byte(" "), b...)) }, wantCode: 401, wantResult: ResultUnauthorized},
		{name: "a signature with an unknown hash is unauthorized", body: body,
			signature: func(b []byte) string { return "md5=" + strings.SplitN(signed(t, "sha256", b), "=", 2)[1] }, wantCode: 401, wantResult: ResultUnauthorized, wantBody: "unsupported"},
		{name: "a signature that is not hex is unauthorized", body: body, signature: func([]byte) string { return "sha256=zz" }, wantCode: 401, wantResult: ResultUnauthorized, wantBody: "malformed"},
		{name: "a signature without a hash name is unauthorized", body: body, signature: func([]byte) string { return "abcdef" }, wantCode: 401, wantResult: ResultUnauthorized},
		{name: "a body that is not JSON is malformed", body: []byte("not json"), signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 400, wantResult: ResultMalformed, wantBody: "malformed event"},
		{name: "an event without involvedObject.kind is malformed", body: []byte(`{"involvedObject":{"name":"x"},"severity":"info"}`),
			signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 400, wantResult: ResultMalformed, wantBody: "involvedObject.kind is required"},
		{name: "an event with an unknown severity is malformed", body: []byte(`{"involvedObject":{"kind":"HelmRelease","name":"x"},"severity":"fatal"}`),
			signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 400, wantResult: ResultMalformed, wantBody: "severity"},
		{name: "two JSON objects in one body are malformed", body: append(append([]byte{}, body...), body...),
			signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 400, wantResult: ResultMalformed, wantBody: "after the JSON object"},
		{name: "a JSON body declared as application/json with a charset is accepted", body: body, contentType: "application/json; charset=utf-8",
			signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 202, wantResult: ResultAccepted},
		{name: "a body declared as form data is refused as an unsupported media type", body: body, contentType: "application/x-www-form-urlencoded",
			signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 415, wantResult: ResultUnsupportedMedia, wantBody: "not JSON"},
		{name: "a body declared as text is refused as an unsupported media type", body: body, contentType: "text/plain",
			signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 415, wantResult: ResultUnsupportedMedia},
		{name: "a truncated event signed as sent is malformed", body: body[:len(body)/2],
			signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 400, wantResult: ResultMalformed, wantBody: "malformed event"},
		{name: "an event truncated in transit no longer matches its signature", body: body[:len(body)/2],
			signature: func([]byte) string { return signed(t, "sha256", body) }, wantCode: 401, wantResult: ResultUnauthorized},
		{name: "an event older than the replay window is stale", body: eventAt(t, sampleTime.Add(-6*time.Minute)), signature: func(b []byte) string { return signed(t, "sha256", b) },
			wantCode: 400, wantResult: ResultStale, wantBody: "stale event: timestamp 2026-03-10T11:54:00Z is 11m0s old, more than the 10m0s replay window"},
		{name: "an event at the edge of the replay window is accepted", body: eventAt(t, sampleTime.Add(-5*time.Minute)), signature: func(b []byte) string { return signed(t, "sha256", b) },
			wantCode: 202, wantResult: ResultAccepted},
		{name: "an event from too far in the future is stale", body: eventAt(t, sampleTime.Add(16*time.Minute)), signature: func(b []byte) string { return signed(t, "sha256", b) },
			wantCode: 400, wantResult: ResultStale, wantBody: "is 11m0s in the future"},
		{name: "a signed event without a timestamp is stale", body: []byte(`{"involvedObject":{"kind":"HelmRelease","namespace":"apps","name":"x"},"severity":"info"}`),
			signature: func(b []byte) string { return signed(t, "sha256", b) }, wantCode: 400, wantResult: ResultStale, wantBody: "timestamp is required"},
		{name: "an old event with a wrong signature is unauthorized, not stale", body: eventAt(t, sampleTime.Add(-time.Hour)),
			signature: func(b []byte) string { s, _ := Sign(b, "sha256", []byte("other")); return s }, wantCode: 401, wantResult: ResultUnauthorized},
		{name: "a body over the limit is too large", body: bytes.Repeat([]byte("a"), 2048), maxBody: 1024, wantCode: 413, wantResult: ResultTooLarge},
		{name: "a GET is not allowed and says which method is", method: http.MethodGet, wantCode: 405, wantResult: ResultMethodNotAllowed, wantHeader: map[string]string{"Allow": "POST"}},
		{name: "a PUT is not allowed", method: http.MethodPut, body: body, wantCode: 405, wantResult: ResultMethodNotAllowed},
		{name: "an event arriving while the queue is full is throttled with Retry-After", body: body, signature: func(b []byte) string { return signed(t, "sha256", b) },
			queueSize: 1, prefill: 1, wantCode: 429, wantResult: ResultThrottled, wantHeader: map[string]string{"Retry-After": RetryAfterSeconds}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			r, err := NewReceiver(ReceiverOptions{Token: testToken, MaxBodyBytes: tt.maxBody, QueueSize: tt.queueSize, Metrics: reg, Now: sampleNow})
			require.NoError(t, err)
			for i := 0; i < tt.prefill; i++ {
				r.queue <- &Event{}
			}
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			req := httptest.NewRequest(method, EventsPath, bytes.NewReader(tt.body))
			if tt.signature != nil {
				req.Header.Set(SignatureHeader, tt.signature(tt.body))
			}
			switch tt.contentType {
			case "":
				req.Header.Set("Content-Type", "application/json")
			case "-":
			default:
				req.Header.Set("Content-Type", tt.contentType)
			}
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			require.Equal(t, tt.wantCode, rec.Code, rec.Body.String())
			require.Contains(t, rec.Body.String(), tt.wantBody)
			require.NotContains(t, rec.Body.String(), string(testToken))
			require.LessOrEqual(t, strings.Count(strings.TrimSpace(rec.Body.String()), "\n"), 0, "the reason is one line")
			for k, v := range tt.wantHeader {
				require.Equal(t, v, rec.Header().Get(k))
			}
			require.Equal(t, 1.0, counterValue(t, r.counter.WithLabelValues(tt.wantResult)))
			if tt.wantCode == http.StatusAccepted {
				require.Len(t, r.queue, 1)
			}
		})
	}
}

// postSigned POSTs body to srv's events path, signed sha256 with testToken, and returns the status.
func postSigned(t *testing.T, srv *httptest.Server, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+EventsPath, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set(SignatureHeader, signed(t, "sha256", body))
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	return res.StatusCode
}

// eventAt is sampleEvent with another timestamp.
func eventAt(t testing.TB, ts time.Time) []byte {
	t.Helper()
	var ev eventv1beta1.Event
	require.NoError(t, json.Unmarshal(sampleEvent(t), &ev))
	ev.Timestamp = metav1.NewTime(ts)
	b, err := json.Marshal(ev)
	require.NoError(t, err)
	return b
}

func TestReceiverWithoutTokenIsRefusedUnlessUnsignedEventsAreAllowed(t *testing.T) {
	_, err := NewReceiver(ReceiverOptions{})
	require.ErrorIs(t, err, ErrNoToken)

	r, err := NewReceiver(ReceiverOptions{AllowUnsigned: true})
	require.NoError(t, err)
	for range 2 { // an unsigned event has no replay window: anyone may forge a fresh one anyway
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, EventsPath, bytes.NewReader(sampleEvent(t))))
		require.Equal(t, http.StatusAccepted, rec.Code)
	}
	require.Len(t, r.queue, 2)
}

func TestReceiverRunHandsEventsOverAndRefusesAfterShutdown(t *testing.T) {
	got := make(chan *Event, 1)
	r, err := NewReceiver(ReceiverOptions{Token: testToken, Now: sampleNow, Handle: func(_ context.Context, ev *Event) { got <- ev }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, nil) }()

	srv := httptest.NewServer(r)
	defer srv.Close()
	body := sampleEvent(t)
	require.Equal(t, http.StatusAccepted, postSigned(t, srv, body))

	select {
	case ev := <-got:
		require.Equal(t, "flux/apps/redis", ev.Subject())
		require.Equal(t, "DependencyNotReady", ev.Reason)
	case <-time.After(10 * time.Second):
		t.Fatal("the event never reached Handle")
	}

	cancel()
	require.NoError(t, <-done)
	rec := httptest.NewRecorder()
	next := eventAt(t, sampleTime.Add(time.Minute))
	req2 := httptest.NewRequest(http.MethodPost, EventsPath, bytes.NewReader(next))
	req2.Header.Set(SignatureHeader, signed(t, "sha256", next))
	r.ServeHTTP(rec, req2)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, RetryAfterSeconds, rec.Header().Get("Retry-After"))
}

func TestEventSubject(t *testing.T) {
	tests := []struct {
		name string
		obj  corev1.ObjectReference
		want string
	}{
		{name: "a HelmRelease event names the release", obj: corev1.ObjectReference{APIVersion: "helm.toolkit.fluxcd.io/v2beta1", Kind: "HelmRelease", Namespace: "apps", Name: "redis"}, want: "flux/apps/redis"},
		{name: "a Kustomization event names the Kustomization's own subject", obj: corev1.ObjectReference{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Namespace: "apps", Name: "redis"}, want: "flux-kustomization/apps/redis"},
		{name: "a Kustomization kind of another group is not Flux's", obj: corev1.ObjectReference{APIVersion: "kustomize.config.k8s.io/v1beta1", Kind: "Kustomization", Namespace: "apps", Name: "redis"}},
		{name: "a HelmRelease kind of another group is not Flux's", obj: corev1.ObjectReference{APIVersion: "example.com/v1", Kind: "HelmRelease", Namespace: "apps", Name: "redis"}},
		{name: "a HelmRelease without a namespace has no subject", obj: corev1.ObjectReference{Kind: "HelmRelease", Name: "redis"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := &Event{Event: eventv1beta1.Event{InvolvedObject: tt.obj}}
			require.Equal(t, tt.want, ev.Subject())
		})
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

func BenchmarkReceiverSignedEvent(b *testing.B) {
	// Distinct bodies (each message numbered), so each one is queued rather than dropped as a duplicate.
	body := string(sampleEvent(b))
	bodies, sigs := make([][]byte, b.N), make([]string, b.N)
	for i := range bodies {
		bodies[i] = []byte(strings.Replace(body, "is not ready", "is not ready "+strconv.Itoa(i), 1))
		sigs[i] = signed(b, "sha256", bodies[i])
	}
	r, err := NewReceiver(ReceiverOptions{Token: testToken, QueueSize: 1, Now: sampleNow})
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		<-drain(r)
		req := httptest.NewRequest(http.MethodPost, EventsPath, bytes.NewReader(bodies[i]))
		req.Header.Set(SignatureHeader, sigs[i])
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted || len(r.queue) != 1 {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

// drain empties the receiver's queue (what Run does) and returns a closed channel.
func drain(r *Receiver) <-chan struct{} {
	for len(r.queue) > 0 {
		<-r.queue
	}
	c := make(chan struct{})
	close(c)
	return c
}

func TestReceiverLimitsABodyOfUnknownLength(t *testing.T) {
	r, err := NewReceiver(ReceiverOptions{Token: testToken, MaxBodyBytes: 1024})
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, EventsPath, bytes.NewReader(bytes.Repeat([]byte("a"), 4096)))
	req.ContentLength = -1 // chunked: the limit is enforced while reading
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	require.Equal(t, 1.0, counterValue(t, r.counter.WithLabelValues(ResultTooLarge)))
}

func TestReceiverHandsEveryEventOfAStormOverInOrder(t *testing.T) {
	const storm = 300
	handled := make(chan string, storm)
	r, err := NewReceiver(ReceiverOptions{Token: testToken, Handle: func(_ context.Context, ev *Event) { handled <- ev.InvolvedObject.Name }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx, nil) }()
	srv := httptest.NewServer(r)
	defer srv.Close()

	// One connection posting back to back: the events arrive well inside batchWindow of each other.
	want := make([]string, storm)
	for i := range want {
		want[i] = "release-" + strconv.Itoa(i)
		body, err := json.Marshal(eventv1beta1.Event{
			InvolvedObject: corev1.ObjectReference{Kind: "HelmRelease", Namespace: "apps", Name: want[i]},
			Severity:       eventv1beta1.EventSeverityInfo, Reason: "UpgradeSucceeded", ReportingController: "helm-controller",
			Timestamp: metav1.Now(),
		})
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, postSigned(t, srv, body))
	}
	got := make([]string, 0, storm)
	for len(got) < storm {
		select {
		case name := <-handled:
			got = append(got, name)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d accepted events reached Handle", len(got), storm)
		}
	}
	require.Equal(t, want, got, "every event, once, in the order it was accepted")
}

func TestReceiverChecksSignaturesWithTheTokenOfTheMoment(t *testing.T) {
	body := sampleEvent(t)
	token := "first-token"
	r, err := NewReceiver(ReceiverOptions{Token: []byte(token), TokenSource: func() string { return token }, Now: sampleNow})
	require.NoError(t, err)
	post := func(key string) int {
		sig, err := Sign(body, "sha256", []byte(key))
		require.NoError(t, err)
		req := httptest.NewRequest(http.MethodPost, EventsPath, bytes.NewReader(body))
		req.Header.Set(SignatureHeader, sig)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		<-drain(r)
		return rec.Code
	}
	require.Equal(t, http.StatusAccepted, post("first-token"))
	token = "second-token" // the Secret updated in place
	require.Equal(t, http.StatusAccepted, post("second-token"))
	require.Equal(t, http.StatusUnauthorized, post("first-token"), "the old token no longer signs")
	token = "" // a file caught empty mid-swap: the last token stays
	require.Equal(t, http.StatusAccepted, post("second-token"))
}
