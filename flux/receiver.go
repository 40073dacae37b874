package flux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncmedic/syncmedic"
)

// ReceiverOptions configure a Receiver.
type ReceiverOptions struct {
	// Token is the HMAC key of the generic-hmac Provider (the Secret's `token`). When empty, X-Signature is not
	// checked (a generic Provider).
	Token []byte
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
// event, answers 202 and queues the event for Run. A full queue is answered 429 with Retry-After, so a burst
// pushes back on notification-controller (which retries) instead of growing memory.
type Receiver struct {
	opts     ReceiverOptions
	log      *slog.Logger
	counter  *prometheus.CounterVec
	results  map[string]prometheus.Counter
	queue    chan *Event
	bufs     sync.Pool
	mu       sync.RWMutex
	stopped  bool
	runMutex sync.Mutex
}

var (
	_ http.Handler     = (*Receiver)(nil)
	_ syncmedic.Source = (*Receiver)(nil)
)

// NewReceiver returns a Receiver; it fails only when the metric cannot be registered.
func NewReceiver(o ReceiverOptions) (*Receiver, error) {
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
	r.bufs.New = func() any { return new(bytes.Buffer) }
	return r, nil
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
	buf := r.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer r.bufs.Put(buf)
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, req.Body, r.opts.MaxBodyBytes)); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			r.reply(w, http.StatusRequestEntityTooLarge, ResultTooLarge, "body exceeds "+strconv.FormatInt(r.opts.MaxBodyBytes, 10)+" bytes")
			return
		}
		r.reply(w, http.StatusBadRequest, ResultMalformed, "reading body: "+oneLine(err))
		return
	}
	body := buf.Bytes()
	if len(r.opts.Token) > 0 {
		if err := VerifySignature(body, req.Header.Get(SignatureHeader), r.opts.Token); err != nil {
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
	r.enqueue(w, ev)
}

func (r *Receiver) enqueue(w http.ResponseWriter, ev *Event) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.stopped {
		w.Header().Set("Retry-After", RetryAfterSeconds)
		r.reply(w, http.StatusServiceUnavailable, ResultUnavailable, "shutting down")
		return
	}
	select {
	case r.queue <- ev:
		r.results[ResultAccepted].Inc()
		w.WriteHeader(http.StatusAccepted)
	default:
		w.Header().Set("Retry-After", RetryAfterSeconds)
		r.reply(w, http.StatusTooManyRequests, ResultThrottled, "event queue is full, retry later")
	}
}

func (r *Receiver) reply(w http.ResponseWriter, code int, result, msg string) {
	r.results[result].Inc()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}

// Run hands queued events to Handle until ctx is cancelled; afterwards the receiver answers 503. Events still
// queued at shutdown are counted in the log and dropped: notification-controller only forwards, so the watcher's
// own view of the HelmRelease (not the event) is what syncmedic acts on. sink is unused: the receiver reports
// nothing itself; its Handle triggers the evaluations.
func (r *Receiver) Run(ctx context.Context, _ syncmedic.Sink) error {
	if !r.runMutex.TryLock() {
		return errors.New("flux receiver: Run called twice")
	}
	defer r.runMutex.Unlock()
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
			r.handle(ctx, ev)
		}
	}
}

func (r *Receiver) handle(ctx context.Context, ev *Event) {
	o := ev.InvolvedObject
	r.log.Debug("flux event", "kind", o.Kind, "namespace", o.Namespace, "name", o.Name, "reason", ev.Reason,
		"severity", ev.Severity, "controller", ev.ReportingController, "subject", ev.Subject())
	if r.opts.Handle != nil {
		r.opts.Handle(ctx, ev)
	}
}

// jsonContentType accepts what notification-controller sends (application/json), any +json type, and no
// Content-Type at all; anything else declared (curl -d sends application/x-www-form-urlencoded unless told
// otherwise) is refused with 415 and a message saying what to send.
func jsonContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
