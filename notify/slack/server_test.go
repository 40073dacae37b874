package slack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"
)

// message is what the Slack test server received: a root post, an update, or a thread reply.
type message struct {
	Method   string // chat.postMessage or chat.update
	Channel  string
	TS       string // for an update, the message updated; for a post, the ts assigned
	ThreadTS string
	Text     string
	Blocks   string
}

// fakeSlack is slack-go's slacktest server with chat.postMessage and chat.update answering the way Slack does
// (a distinct ts per message) and recording what they received; failures can be queued to simulate an outage.
type fakeSlack struct {
	*slacktest.Server
	mu       sync.Mutex
	messages []message
	failures []func(w http.ResponseWriter) // answered first, in order, before any success
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
		if len(f.failures) > 0 {
			fail := f.failures[0]
			f.failures = f.failures[1:]
			fail(w)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m := message{Method: method, Channel: r.Form.Get("channel"), TS: r.Form.Get("ts"),
			ThreadTS: r.Form.Get("thread_ts"), Text: r.Form.Get("text"), Blocks: r.Form.Get("blocks")}
		if method == "chat.postMessage" {
			f.seq++
			m.TS = fmt.Sprintf("1710072000.%06d", f.seq)
		}
		f.messages = append(f.messages, m)
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C0INCIDENT", "ts": m.TS, "text": m.Text})
	}
}

func (f *fakeSlack) fail(fns ...func(w http.ResponseWriter)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, fns...)
}

func (f *fakeSlack) pendingFailures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.failures)
}

func (f *fakeSlack) received() []message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]message(nil), f.messages...)
}

func (f *fakeSlack) roots() []message {
	var out []message
	for _, m := range f.received() {
		if m.Method == "chat.postMessage" && m.ThreadTS == "" {
			out = append(out, m)
		}
	}
	return out
}

// thread returns, in order, the updates of the root ts and the replies in its thread.
func (f *fakeSlack) thread(ts string) (updates, replies []message) {
	for _, m := range f.received() {
		switch {
		case m.Method == "chat.update" && m.TS == ts:
			updates = append(updates, m)
		case m.Method == "chat.postMessage" && m.ThreadTS == ts:
			replies = append(replies, m)
		}
	}
	return updates, replies
}

func status(code int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { http.Error(w, http.StatusText(code), code) }
}

func rateLimited(seconds string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", seconds)
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

func slackOKFalse(code string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": code})
	}
}

// blocksText decodes a message's blocks for assertions on what a person sees.
func blocksText(t *testing.T, raw string) string {
	t.Helper()
	if raw == "" {
		return ""
	}
	var b slack.Blocks
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		t.Fatalf("blocks: %v", err)
	}
	out, _ := json.Marshal(b)
	s, _ := url.QueryUnescape(string(out))
	return s
}
