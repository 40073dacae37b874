package flux

import (
	"context"
	"crypto/hmac"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncmedic/syncmedic"
)

// ReceiverOptions configure a Receiver.
type ReceiverOptions struct {
	// Token is the HMAC key of the generic-hmac Provider (the Secret's `token`). It is required unless
	// AllowUnsigned is set.
	Token []byte
	// AllowUnsigned, with an empty Token, accepts events without checking X-Signature or their timestamp (a
	// generic Provider): anyone who can reach the receiver can then trigger evaluations. For tests only.
	AllowUnsigned bool
	// MaxEventAge is how far a signed event's timestamp may be from now; zero means DefaultMaxEventAge. Within it an
	// identical body is accepted once (the copies are answered 202 and dropped).
	MaxEventAge time.Duration
	// Now returns the time timestamps are checked against; nil means time.Now.
	Now func() time.Time
	// TokenSource, when set with Token, returns the token at each request (a token file read again when its Secret
	// is updated in place): a token other than the last one keys new HMACs, so a rotated token is the one a
	// signature is checked with from then on. Token is the first one; an empty answer keeps the last token.
	TokenSource func() string
	// MaxBodyBytes is the body limit; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// QueueSize bounds the accepted events waiting for Handle; zero means DefaultQueueSize.
	QueueSize int
	// Handle is called by Run, one event at a time, for every accepted event. ctx is Run's context: it is
	// cancelled on shutdown.
	Handle func(ctx context.Context, ev *Event)
	// Log receives one line per rejected or handled event; nil discards.
	Log *slog.Logger
	// Metrics is where syncmedic_events_received_total is registered; nil keeps it unregistered.
	Metrics prometheus.Registerer
}

// Receiver serves POST /flux/events: it reads the body once (up to the limit), verifies the signature, decodes the
// event, refuses a signed one outside the replay window (400) or already accepted within it (202, dropped), answers
// 202 and queues the event for Run. A full queue is answered 429 with Retry-After, so a burst
// pushes back on notification-controller (which retries) instead of growing memory.
type Receiver struct {
	opts     ReceiverOptions
	log      *slog.Logger
	counter  *prometheus.CounterVec
	results  map[string]prometheus.Counter
	accepted prometheus.Counter
	queue    chan *Event
	bufs     sync.Pool               // *[]byte: request bodies
	key      atomic.Pointer[hmacKey] // the token and its HMAC pools; nil: signatures are not checked
	replay   *replayWindow           // nil when signatures are not checked
	mu       sync.RWMutex
	stopped  bool
	runMutex sync.Mutex
}

var (
	_ http.Handler     = (*Receiver)(nil)
	_ syncmedic.Source = (*Receiver)(nil)
)

// NewReceiver returns a Receiver. It fails when there is no Token and AllowUnsigned is not set (ErrNoToken), and
// when the metric cannot be registered.
func NewReceiver(o ReceiverOptions) (*Receiver, error) {
	if len(o.Token) == 0 && !o.AllowUnsigned {
		return nil, ErrNoToken
	}
	if o.MaxEventAge <= 0 {
		o.MaxEventAge = DefaultMaxEventAge
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	counter, err := newEventsCounter(o.Metrics)
	if err != nil {
		return nil, fmt.Errorf("registering receiver metrics: %w", err)
	}
	r := &Receiver{opts: o, log: log, counter: counter, results: map[string]prometheus.Counter{},
		queue: make(chan *Event, o.QueueSize)}
	for _, res := range allResults {
		r.results[res] = counter.WithLabelValues(res)
	}
	r.accepted = r.results[ResultAccepted]
	r.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	if len(o.Token) > 0 {
		r.key.Store(newHMACKey(string(o.Token)))
		r.replay = newReplayWindow(o.MaxEventAge, MaxRememberedEvents, o.Now)
	}
	return r, nil
}

// hmacKey is a token and the pools of HMACs keyed with it, by hash name (*pooledMAC).
type hmacKey struct {
	token string
	macs  map[string]*sync.Pool
}

func newHMACKey(token string) *hmacKey {
	k := &hmacKey{token: token, macs: map[string]*sync.Pool{}}
	for name, newHash := range signatureHashes {
		k.macs[name] = &sync.Pool{New: func() any {
			return &pooledMAC{mac: hmac.New(newHash, []byte(token)), sum: make([]byte, 0, maxSignatureBytes),
				want: make([]byte, maxSignatureBytes)}
		}}
	}
	return k
}

// currentKey returns the key signatures are checked with now (nil: none), keying new HMACs when TokenSource
// names another token than the last one.
func (r *Receiver) currentKey() *hmacKey {
	k := r.key.Load()
	if k == nil || r.opts.TokenSource == nil {
		return k
	}
	if t := r.opts.TokenSource(); t != "" && t != k.token {
		nk := newHMACKey(t)
		if !r.key.CompareAndSwap(k, nk) {
			return r.key.Load() // another request keyed it first
		}
		r.log.Info("flux receiver: the HMAC token changed, signatures are checked with the new one")
		return nk
	}
	return k
}

// ServeHTTP implements http.Handler.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.reply(w, http.StatusMethodNotAllowed, ResultMethodNotAllowed, "method not allowed: use POST")
		return
	}
	if ct := req.Header.Get("Content-Type"); !jsonContentType(ct) {
		r.reply(w, http.StatusUnsupportedMediaType, ResultUnsupportedMedia, "Content-Type "+truncate(ct, 64)+" is not JSON: send application/json")
		return
	}
	if req.ContentLength > r.opts.MaxBodyBytes {
		r.reply(w, http.StatusRequestEntityTooLarge, ResultTooLarge, "body exceeds "+strconv.FormatInt(r.opts.MaxBodyBytes, 10)+" bytes")
		return
	}
	buf := r.bufs.Get().(*[]byte)
	defer r.bufs.Put(buf)
	body, tooLarge, err := readBody((*buf)[:0], req.Body, r.opts.MaxBodyBytes)
	*buf = body[:0]
	switch {
	case tooLarge:
		w.Header().Set("Connection", "close") // as http.MaxBytesReader does: the rest of the body is not read
		r.reply(w, http.StatusRequestEntityTooLarge, ResultTooLarge, "body exceeds "+strconv.FormatInt(r.opts.MaxBodyBytes, 10)+" bytes")
		return
	case err != nil:
		r.reply(w, http.StatusBadRequest, ResultMalformed, "reading body: "+oneLine(err))
		return
	}
	if key := r.currentKey(); key != nil {
		if err := key.verify(body, req.Header.Get(SignatureHeader)); err != nil {
			r.log.Info("flux event rejected", "reason", err.Error(), "remote", req.RemoteAddr)
			r.reply(w, http.StatusUnauthorized, ResultUnauthorized, err.Error())
			return
		}
	}
	ev, err := DecodeEvent(body)
	if err != nil {
		r.reply(w, http.StatusBadRequest, ResultMalformed, err.Error())
		return
	}
	if r.replay == nil {
		r.enqueue(w, ev)
		return
	}
	// A signed event is checked against the replay window: notification-controller does not retry a 400.
	if err := r.replay.check(ev.Timestamp.Time); err != nil {
		r.log.Info("flux event rejected", "reason", err.Error(), "remote", req.RemoteAddr)
		r.reply(w, http.StatusBadRequest, ResultStale, err.Error())
		return
	}
	if r.replay.admit(body, ev.Timestamp.Time, func() bool { return r.enqueue(w, ev) }) {
		// Answered 202 like the first copy: a retry whose first answer was lost is not an error to its sender.
		r.log.Info("flux event dropped: the same signed body was accepted before", "remote", req.RemoteAddr)
		r.results[ResultDuplicate].Inc()
		w.WriteHeader(http.StatusAccepted)
	}
}

// enqueue queues ev and answers 202, or answers 503 or 429; it reports whether ev was queued.
func (r *Receiver) enqueue(w http.ResponseWriter, ev *Event) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.stopped {
		w.Header().Set("Retry-After", RetryAfterSeconds)
		r.reply(w, http.StatusServiceUnavailable, ResultUnavailable, "shutting down")
		return false
	}
	select {
	case r.queue <- ev:
		r.accepted.Inc()
		w.WriteHeader(http.StatusAccepted)
		return true
	default:
		w.Header().Set("Retry-After", RetryAfterSeconds)
		r.reply(w, http.StatusTooManyRequests, ResultThrottled, "event queue is full, retry later")
		return false
	}
}

func (r *Receiver) reply(w http.ResponseWriter, code int, result, msg string) {
	r.results[result].Inc()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}

// batchWindow is how far apart events must arrive for each to be handed over as soon as it comes. Closer than
// that (an event storm: Flux restarting, a mass upgrade) Run waits out the window once it is woken and hands over
// everything queued by then, so it is woken about once per window instead of once per event; nothing is dropped,
// merged or reordered, and an event that comes alone is handed over at once.
const batchWindow = time.Millisecond

// Run hands queued events to Handle, in the order they were accepted, until ctx is cancelled; afterwards the
// receiver answers 503. Events still queued at shutdown are counted in the log and dropped: notification-controller
// only forwards, so the watcher's own view of the HelmRelease (not the event) is what syncmedic acts on. sink is
// unused: the receiver reports nothing itself; its Handle triggers the evaluations.
func (r *Receiver) Run(ctx context.Context, _ syncmedic.Sink) error {
	if !r.runMutex.TryLock() {
		return errors.New("flux receiver: Run called twice")
	}
	defer r.runMutex.Unlock()
	var woken time.Time // when the last batch was handed over
	for {
		select {
		case <-ctx.Done():
			r.mu.Lock()
			r.stopped = true
			r.mu.Unlock()
			if n := len(r.queue); n > 0 {
				r.log.Info("flux receiver stopped with events queued", "dropped", n)
			}
			return nil
		case ev := <-r.queue:
			if time.Since(woken) < batchWindow {
				time.Sleep(batchWindow)
			}
			r.handle(ctx, ev)
			r.drain(ctx)
			woken = time.Now()
		}
	}
}

// drain hands over the events queued now, without waiting for more.
func (r *Receiver) drain(ctx context.Context) {
	for {
		select {
		case ev := <-r.queue:
			r.handle(ctx, ev)
		default:
			return
		}
	}
}

func (r *Receiver) handle(ctx context.Context, ev *Event) {
	if o := ev.InvolvedObject; r.log.Enabled(ctx, slog.LevelDebug) {
		r.log.Debug("flux event", "kind", o.Kind, "namespace", o.Namespace, "name", o.Name, "reason", ev.Reason,
			"severity", ev.Severity, "controller", ev.ReportingController, "subject", ev.Subject())
	}
	if r.opts.Handle != nil {
		r.opts.Handle(ctx, ev)
	}
}

// jsonContentType accepts what notification-controller sends (application/json), any +json type, and no
// Content-Type at all; anything else declared (curl -d sends application/x-www-form-urlencoded unless told
// otherwise) is refused with 415 and a message saying what to send.
func jsonContentType(ct string) bool {
	if ct == "" || ct == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// readBody appends the body to b, reading at most limit+1 bytes; tooLarge says the body is over limit.
func readBody(b []byte, body io.Reader, limit int64) (_ []byte, tooLarge bool, _ error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		room := b[len(b):cap(b)]
		if left := limit + 1 - int64(len(b)); int64(len(room)) > left {
			room = room[:left]
		}
		n, err := body.Read(room)
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			return b, true, nil
		}
		if errors.Is(err, io.EOF) {
			return b, false, nil
		}
		if err != nil {
			return b, false, err
		}
	}
}

// maxSignatureBytes is the size of the largest HMAC a signature may name (sha512).
const maxSignatureBytes = sha512.Size

// pooledMAC is an HMAC keyed with a token and the buffers to check a signature with it.
type pooledMAC struct {
	mac       hash.Hash
	sum, want []byte
}

// verify is VerifySignature with HMACs from the key's pools: it allocates nothing. Any header it does not take on
// (missing, malformed, an unknown hash, too long) is left to VerifySignature, which words the error.
func (k *hmacKey) verify(body []byte, header string) error {
	name, sig, ok := strings.Cut(strings.TrimSpace(header), "=")
	pool := k.macs[strings.ToLower(name)]
	if !ok || sig == "" || pool == nil || len(sig) > 2*maxSignatureBytes {
		return VerifySignature(body, header, []byte(k.token))
	}
	m := pool.Get().(*pooledMAC)
	defer pool.Put(m)
	want, ok := decodeHex(m.want[:0], sig)
	if !ok {
		return ErrSignatureMalformed
	}
	m.mac.Reset()
	m.mac.Write(body)
	if !hmac.Equal(m.mac.Sum(m.sum[:0]), want) {
		return ErrSignatureMismatch
	}
	return nil
}

// decodeHex appends the bytes of the hex string s to dst, as hex.DecodeString reads it.
func decodeHex(dst []byte, s string) ([]byte, bool) {
	if len(s)%2 == 1 {
		return nil, false
	}
	for i := 0; i < len(s); i += 2 {
		a, ok1 := fromHex(s[i])
		b, ok2 := fromHex(s[i+1])
		if !ok1 || !ok2 {
			return nil, false
		}
		dst = append(dst, a<<4|b)
	}
	return dst, true
}

func fromHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
