package reliability

import (
	"net/http"
	"strings"
	"testing"

	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
)

// slackMessage is what the Slack test server received: a root post, an update, or a thread reply.
type slackMessage struct {
	Method   string // chat.postMessage or chat.update
	TS       string // for an update, the message updated; for a post, the ts assigned
	ThreadTS string
	Text     string
}

// fakeSlack is the recording Slack test server (testenv/slackrec), with its outage controls, read the way these
// tests read it: roots and replies by their fallback text.
type fakeSlack struct{ *slackrec.Server }

func newFakeSlack(t *testing.T) *fakeSlack { return &fakeSlack{slackrec.New(t)} }

func (f *fakeSlack) fail(fn func(w http.ResponseWriter))         { f.Fail(fn) }
func (f *fakeSlack) ok()                                         { f.OK() }
func (f *fakeSlack) failNext(fns ...func(w http.ResponseWriter)) { f.FailNext(fns...) }
func (f *fakeSlack) refusedCalls() int                           { return f.Refused() }

func (f *fakeSlack) received() []slackMessage {
	var out []slackMessage
	for _, m := range f.All() {
		out = append(out, slackMessage{Method: m.Method, TS: m.TS, ThreadTS: m.ThreadTS, Text: m.Text})
	}
	return out
}

// roots returns the root messages whose fallback text contains s (every root when s is empty).
func (f *fakeSlack) roots(s string) []slackMessage {
	var out []slackMessage
	for _, m := range f.received() {
		if m.Method == "chat.postMessage" && m.ThreadTS == "" && strings.Contains(m.Text, s) {
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

var (
	status      = slackrec.Status
	rateLimited = slackrec.RateLimited
)
