package reliability

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/slack-go/slack/slacktest"
)

// slackMessage is what the Slack test server received: a root post, an update, or a thread reply.
type slackMessage struct {
	Method   string // chat.postMessage or chat.update
	TS       string // for an update, the message updated; for a post, the ts assigned
	ThreadTS string
	Text     string
}

// fakeSlack is slack-go's slacktest server answering chat.postMessage and chat.update the way Slack does (a
// distinct ts per post), recording what it accepted; fail makes it answer every call with an error until ok.
type fakeSlack struct {
	*slacktest.Server
	mu       sync.Mutex
	messages []slackMessage
	failWith func(w http.ResponseWriter)   // nil: Slack is up
	script   []func(w http.ResponseWriter) // answered first, in order, before failWith or success
	refused  int                           // calls answered with an error
	seq      int
}

func newFakeSlack(t *testing.T) *fakeSlack {
	t.Helper()
	f := &fakeSlack{}
	f.Server = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", f.handle("chat.postMessage"))
		c.Handle("/chat.update", f.handle("chat.update"))
	})
	f.Start()
	t.Cleanup(f.Stop)
	return f
}

func (f *fakeSlack) handle(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.script) > 0 {
			fail := f.script[0]
			f.script = f.script[1:]
			f.refused++
			fail(w)
			return
		}
		if f.failWith != nil {
			f.refused++
			f.failWith(w)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m := slackMessage{Method: method, TS: r.Form.Get("ts"), ThreadTS: r.Form.Get("thread_ts"), Text: r.Form.Get("text")}
		if method == "chat.postMessage" {
			f.seq++
			m.TS = fmt.Sprintf("1710072000.%06d", f.seq)
		}
		f.messages = append(f.messages, m)
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C0INCIDENT", "ts": m.TS, "text": m.Text})
	}
}

// fail makes every call fail with fn until ok is called.
func (f *fakeSlack) fail(fn func(w http.ResponseWriter)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failWith = fn
}

func (f *fakeSlack) ok() { f.fail(nil) }

// failNext answers the next calls with fns, in order.
func (f *fakeSlack) failNext(fns ...func(w http.ResponseWriter)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, fns...)
}

func (f *fakeSlack) refusedCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

func (f *fakeSlack) received() []slackMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]slackMessage(nil), f.messages...)
}

// roots returns the root messages whose fallback text contains s (every root when s is empty).
func (f *fakeSlack) roots(s string) []slackMessage {
	var out []slackMessage
	for _, m := range f.received() {
		if m.Method == "chat.postMessage" && m.ThreadTS == "" && contains(m.Text, s) {
			out = append(out, m)
		}
	}
	return out
}

// replies returns, in order, the replies in the thread of ts.
func (f *fakeSlack) replies(ts string) []slackMessage {
	var out []slackMessage
	for _, m := range f.received() {
		if m.Method == "chat.postMessage" && m.ThreadTS == ts {
			out = append(out, m)
		}
	}
	return out
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func status(code int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { http.Error(w, http.StatusText(code), code) }
}

func rateLimited(seconds string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", seconds)
		w.WriteHeader(http.StatusTooManyRequests)
	}
}
