package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
)

// post is one chat.postMessage as it reached the Slack server, with the moment it arrived.
type post struct {
	At                            time.Time
	Channel, ThreadTS, Text, Blks string
}

// timedSlack is a reverse proxy in front of the recording Slack server (slackrec) that notes when each
// chat.postMessage arrives: slackrec keeps the order of the calls, not their times.
type timedSlack struct {
	*httptest.Server
	rec  *slackrec.Server
	path string // the API path under the server's root ("/")

	mu    sync.Mutex
	posts []post
}

func newTimedSlack(t testing.TB) *timedSlack {
	t.Helper()
	s := &timedSlack{rec: slackrec.New(t)}
	target, err := url.Parse(s.rec.GetAPIURL())
	if err != nil {
		t.Fatalf("slack: %v", err)
	}
	s.path = target.Path
	proxy := httputil.NewSingleHostReverseProxy(target)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		if strings.HasSuffix(r.URL.Path, "/chat.postMessage") {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if form, err := url.ParseQuery(string(body)); err == nil {
				s.mu.Lock()
				s.posts = append(s.posts, post{At: at, Channel: form.Get("channel"), ThreadTS: form.Get("thread_ts"),
					Text: form.Get("text"), Blks: form.Get("blocks")})
				s.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// apiURL is the Slack API URL to give syncmedic serve (--slack-api-url).
func (s *timedSlack) apiURL() string { return s.URL + s.path }

// roots returns the thread roots (posts without thread_ts) received so far, in order.
func (s *timedSlack) roots() []post {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []post
	for _, p := range s.posts {
		if p.ThreadTS == "" {
			out = append(out, p)
		}
	}
	return out
}

// mentions says whether the post names every one of subs (in its fallback text or its blocks).
func (p post) mentions(subs ...string) bool {
	for _, s := range subs {
		if !strings.Contains(p.Text, s) && !strings.Contains(p.Blks, s) {
			return false
		}
	}
	return true
}
