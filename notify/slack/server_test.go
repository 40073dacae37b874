package slack

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/slack-go/slack"

	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
)

// thread returns, in order, the updates of the root ts and the replies in its thread.
func thread(srv *slackrec.Server, ts string) (updates, replies []slackrec.Message) {
	for _, m := range srv.Thread(ts) {
		if m.Method == "chat.update" {
			updates = append(updates, m)
		} else {
			replies = append(replies, m)
		}
	}
	return updates, replies
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
