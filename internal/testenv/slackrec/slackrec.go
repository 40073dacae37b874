// Package slackrec is a Slack Web API test server for end-to-end tests: slack-go's slacktest answering
// chat.postMessage and chat.update as Slack does (a distinct ts per post) and recording every call in order; Fail
// and FailNext play a Slack outage.
package slackrec

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/slack-go/slack/slacktest"
)

// Message is one chat.postMessage, chat.update, chat.postEphemeral, views.open or views.update the server
// accepted; View is the view of the views calls (JSON), User the user of an ephemeral message.
type Message struct {
	Method, Channel, TS, ThreadTS, Text, Blocks string
	View, ViewID, TriggerID, User               string
	// Token is the bot token the call carried (the form's token, else the Authorization header's bearer token).
	Token string
}

// Server is a running recording Slack test server; give a notifier its URL() as the Slack API URL.
type Server struct {
	*slacktest.Server
	mu       sync.Mutex
	messages []Message
	seq      int
	failWith func(w http.ResponseWriter)   // nil: Slack is up
	script   []func(w http.ResponseWriter) // answered first, in order, before failWith or success
	refused  int                           // calls answered with an error
	socketState
}

// New starts a server that stops when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{}
	s.Server = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", s.handle("chat.postMessage"))
		c.Handle("/chat.update", s.handle("chat.update"))
		c.Handle("/chat.postEphemeral", s.handle("chat.postEphemeral"))
		c.Handle("/views.open", s.handleView("views.open"))
		c.Handle("/views.update", s.handleView("views.update"))
		c.Handle("/usergroups.list", s.userGroups)
		c.Handle("/apps.connections.open", s.connectionsOpen)
		c.Handle(socketPath, s.socket)
	})
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) handle(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.script) > 0 {
			fail := s.script[0]
			s.script = s.script[1:]
			s.refused++
			fail(w)
			return
		}
		if s.failWith != nil {
			s.refused++
			s.failWith(w)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m := Message{Method: method, Channel: r.Form.Get("channel"), TS: r.Form.Get("ts"), ThreadTS: r.Form.Get("thread_ts"), Text: r.Form.Get("text"),
			Blocks: r.Form.Get("blocks"), User: r.Form.Get("user"), Token: r.Form.Get("token")}
		if m.Token == "" {
			m.Token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		if method == "chat.postMessage" {
			s.seq++
			m.TS = fmt.Sprintf("1710072000.%06d", s.seq)
		}
		s.messages = append(s.messages, m)
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS, "text": m.Text})
	}
}

// Fail makes every call fail with fn (an outage: Status(503), RateLimited("1")…) until OK.
func (s *Server) Fail(fn func(w http.ResponseWriter)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = fn
}

// OK ends Fail: Slack is up again.
func (s *Server) OK() { s.Fail(nil) }

// FailNext answers the next calls with fns, in order, then as before.
func (s *Server) FailNext(fns ...func(w http.ResponseWriter)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, fns...)
}

// Pending counts the answers FailNext queued that no call has received yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// Refused counts the calls answered with an error.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Status answers with HTTP status code.
func Status(code int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { http.Error(w, http.StatusText(code), code) }
}

// RateLimited answers 429 with Retry-After: seconds, as Slack does.
func RateLimited(seconds string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", seconds)
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// OKFalse answers 200 with {"ok": false, "error": code}, as Slack refuses a call it will not take (channel_not_found…).
func OKFalse(code string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": code})
	}
}

// All returns every message received, in order.
func (s *Server) All() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Roots returns the root messages (new incidents) whose text or blocks contain every one of subs.
func (s *Server) Roots(subs ...string) []Message {
	var out []Message
	for _, m := range s.All() {
		if m.Method == "chat.postMessage" && m.ThreadTS == "" && containsAll(m.Text+m.Blocks, subs) {
			out = append(out, m)
		}
	}
	return out
}

// Thread returns the replies to ts and the updates of ts, in order.
func (s *Server) Thread(ts string) []Message {
	var out []Message
	for _, m := range s.All() {
		if m.ThreadTS == ts || (m.Method == "chat.update" && m.TS == ts) {
			out = append(out, m)
		}
	}
	return out
}

// Summary lists what the server received, one line per message ("root: …", "reply: …", "update: …").
func (s *Server) Summary() string {
	var lines []string
	for _, m := range s.All() {
		kind := "root"
		if m.ThreadTS != "" {
			kind = "reply"
		} else if m.Method == "chat.update" {
			kind = "update"
		}
		lines = append(lines, kind+": "+m.Text)
	}
	if len(lines) == 0 {
		return "nothing"
	}
	return strings.Join(lines, "\n")
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
