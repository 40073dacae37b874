package slackrec

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// socketPath is where the server's Socket Mode WebSocket is; apps.connections.open hands out its URL.
const socketPath = "/socket-mode/link"

// AppToken is the app-level token (xapp-…) apps.connections.open accepts.
const AppToken = "xapp-1-A0SYNCMEDIC-1-test"

// socketState is the Socket Mode side of the server: the connection the client opened, the acks it sent.
type socketState struct {
	sockMu   sync.Mutex
	conn     *websocket.Conn
	opens    int                    // successful apps.connections.open calls
	appToks  []string               // app-level tokens apps.connections.open accepts (nil: AppToken)
	opened   []string               // the app-level token of each successful apps.connections.open
	acks     map[string]chan []byte // envelope ID → where its ack goes
	connWait chan struct{}          // closed when a client says hello back (connected)
	groups   map[string][]string    // user group ID → member IDs, for usergroups.list
	views    int                    // views opened, for view IDs
	writeMu  sync.Mutex             // gorilla allows one writer at a time
}

// SetUserGroups sets what usergroups.list answers: user group ID → member IDs.
func (s *Server) SetUserGroups(groups map[string][]string) {
	s.sockMu.Lock()
	defer s.sockMu.Unlock()
	s.groups = groups
}

func (s *Server) userGroups(w http.ResponseWriter, _ *http.Request) {
	s.sockMu.Lock()
	defer s.sockMu.Unlock()
	var out []map[string]any
	for id, users := range s.groups {
		out = append(out, map[string]any{"id": id, "users": users, "user_count": len(users)})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "usergroups": out})
}

// handleView records views.open and views.update (JSON bodies, as slack-go sends them) and answers with the view
// and its ID, as Slack does.
func (s *Server) handleView(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			TriggerID string          `json:"trigger_id"`
			ViewID    string          `json:"view_id"`
			View      json.RawMessage `json:"view"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.View) == 0 {
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "invalid_arguments"})
			return
		}
		s.sockMu.Lock()
		id := req.ViewID
		if method == "views.open" {
			s.views++
			id = fmt.Sprintf("V%08d", s.views)
		}
		s.sockMu.Unlock()
		s.mu.Lock()
		s.messages = append(s.messages, Message{Method: method, View: string(req.View), ViewID: id, TriggerID: req.TriggerID,
			Token: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")})
		s.mu.Unlock()
		var view map[string]any
		_ = json.Unmarshal(req.View, &view)
		view["id"] = id
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "view": view})
	}
}

// connectionsOpen answers apps.connections.open: the app-level token in the Authorization header, then the
// WebSocket URL to dial.
func (s *Server) connectionsOpen(w http.ResponseWriter, r *http.Request) {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.sockMu.Lock()
	accepted := s.appToks
	if accepted == nil {
		accepted = []string{AppToken}
	}
	if !slices.Contains(accepted, token) {
		s.sockMu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	s.opens++
	s.opened = append(s.opened, token)
	s.sockMu.Unlock()
	u := strings.Replace(strings.TrimSuffix(s.GetAPIURL(), "/"), "http://", "ws://", 1)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "url": u + socketPath + "?ticket=t" + strconv.Itoa(s.opens) + "&app_id=A0SYNCMEDIC"})
}

// socket is the Socket Mode WebSocket: hello first, then the envelopes Deliver sends; each ack goes to its waiter.
func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	// slack-go dials with Origin: https://api.slack.com, as Slack's own link servers accept.
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	s.sockMu.Lock()
	s.conn = conn
	if s.acks == nil {
		s.acks = map[string]chan []byte{}
	}
	if s.connWait == nil {
		s.connWait = make(chan struct{})
	}
	wait := s.connWait
	s.sockMu.Unlock()
	hello := map[string]any{"type": "hello", "num_connections": 1,
		"debug_info":      map[string]any{"host": "applink-test", "build_number": 1, "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": "A0SYNCMEDIC"}}
	if err := s.write(conn, hello); err != nil {
		return
	}
	select {
	case <-wait:
	default:
		close(wait)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() { // Slack pings; slack-go reconnects when it hears none for 30s
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s.writeMu.Lock()
				_ = conn.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
				s.writeMu.Unlock()
			}
		}
	}()
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(msg, &ack) != nil || ack.EnvelopeID == "" {
			continue
		}
		s.sockMu.Lock()
		ch := s.acks[ack.EnvelopeID]
		delete(s.acks, ack.EnvelopeID)
		s.sockMu.Unlock()
		if ch != nil {
			ch <- msg
		}
	}
}

func (s *Server) write(conn *websocket.Conn, v any) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return conn.WriteJSON(v)
}

// WaitSocket waits until a Socket Mode client is connected (it received hello).
func (s *Server) WaitSocket(timeout time.Duration) error {
	s.sockMu.Lock()
	if s.connWait == nil {
		s.connWait = make(chan struct{})
	}
	wait := s.connWait
	s.sockMu.Unlock()
	select {
	case <-wait:
		return nil
	case <-time.After(timeout):
		return errors.New("no Socket Mode client connected")
	}
}

// Ack is a client's acknowledgement of an envelope: its ID and the payload it answered with (null when none).
type Ack struct {
	EnvelopeID string          `json:"envelope_id"`
	Payload    json.RawMessage `json:"payload"`
}

// Deliver sends payload (an interaction as Slack documents it) in an "interactive" envelope over the Socket Mode
// connection and waits for its ack.
func (s *Server) Deliver(envelopeID string, payload any, timeout time.Duration) (Ack, error) {
	s.sockMu.Lock()
	conn := s.conn
	ch := make(chan []byte, 1)
	if s.acks == nil {
		s.acks = map[string]chan []byte{}
	}
	s.acks[envelopeID] = ch
	s.sockMu.Unlock()
	if conn == nil {
		return Ack{}, errors.New("no Socket Mode connection")
	}
	env := map[string]any{"envelope_id": envelopeID, "type": "interactive", "payload": payload, "accepts_response_payload": true}
	if err := s.write(conn, env); err != nil {
		return Ack{}, err
	}
	select {
	case msg := <-ch:
		var a Ack
		err := json.Unmarshal(msg, &a)
		return a, err
	case <-time.After(timeout):
		return Ack{}, fmt.Errorf("envelope %s was not acknowledged within %s", envelopeID, timeout)
	}
}

// SetAppTokens sets the app-level tokens apps.connections.open accepts from now on (a rotation revokes the old one).
func (s *Server) SetAppTokens(tokens ...string) {
	s.sockMu.Lock()
	defer s.sockMu.Unlock()
	s.appToks = tokens
}

// OpenedWith returns the app-level token of each successful apps.connections.open, in order.
func (s *Server) OpenedWith() []string {
	s.sockMu.Lock()
	defer s.sockMu.Unlock()
	return slices.Clone(s.opened)
}

// Disconnect asks the Socket Mode client to reconnect, as Slack does when it refreshes a connection (a disconnect
// message, reason refresh_requested): the client opens a new one with apps.connections.open.
func (s *Server) Disconnect() error {
	s.sockMu.Lock()
	conn := s.conn
	s.sockMu.Unlock()
	if conn == nil {
		return errors.New("no Socket Mode connection")
	}
	return s.write(conn, map[string]any{"type": "disconnect", "reason": "refresh_requested",
		"debug_info": map[string]any{"host": "applink-test"}})
}

// Opens counts the successful apps.connections.open calls.
func (s *Server) Opens() int {
	s.sockMu.Lock()
	defer s.sockMu.Unlock()
	return s.opens
}

// Views returns the views.open and views.update calls, in order.
func (s *Server) Views() []Message {
	var out []Message
	for _, m := range s.All() {
		if strings.HasPrefix(m.Method, "views.") {
			out = append(out, m)
		}
	}
	return out
}

// Ephemerals returns the chat.postEphemeral calls, in order.
func (s *Server) Ephemerals() []Message {
	var out []Message
	for _, m := range s.All() {
		if m.Method == "chat.postEphemeral" {
			out = append(out, m)
		}
	}
	return out
}

// Sign returns the headers Slack signs a request body with at ts: X-Slack-Request-Timestamp and
// X-Slack-Signature = v0=hex(HMAC-SHA256(secret, "v0:<ts>:<body>")).
func Sign(secret string, ts time.Time, body []byte) http.Header {
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + stamp + ":"))
	mac.Write(body)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", stamp)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	return h
}

// FormBody is an interaction as Slack posts it to a request URL: payload=<the JSON>, form-encoded.
func FormBody(payload any) []byte {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	return []byte(url.Values{"payload": {string(b)}}.Encode())
}

// PostInteraction posts body to a request URL with header, as Slack does, and returns the status and the answer.
func PostInteraction(target string, header http.Header, body []byte) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(string(body)))
	if err != nil {
		return 0, "", err
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// BlockActions is a block_actions payload as Slack documents it: user clicked the button actionID (value) in
// the message ts of channel.
func BlockActions(user, userName, team, channel, ts, actionID, value, triggerID string) map[string]any {
	return map[string]any{
		"type":         "block_actions",
		"team":         map[string]any{"id": team, "domain": "example"},
		"user":         map[string]any{"id": user, "username": userName, "name": userName, "team_id": team},
		"api_app_id":   "A0SYNCMEDIC",
		"token":        "legacy-verification-token",
		"container":    map[string]any{"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false},
		"trigger_id":   triggerID,
		"channel":      map[string]any{"id": channel, "name": "incidents"},
		"message":      map[string]any{"type": "message", "ts": ts, "text": "incident"},
		"response_url": "https://hooks.slack.com/actions/T0/1/x",
		"actions": []map[string]any{{"action_id": actionID, "block_id": "syncmedic.actions", "type": "button", "value": value,
			"text": map[string]any{"type": "plain_text", "text": actionID}, "action_ts": "1710072000.000100"}},
	}
}

// ViewSubmission is a view_submission payload as Slack documents it: user submitted view (a view as views.open
// got it, with its id, callback_id and private_metadata) with state values.
func ViewSubmission(user, userName, team, viewID string, view json.RawMessage, values map[string]any) map[string]any {
	var v map[string]any
	_ = json.Unmarshal(view, &v)
	if v == nil {
		v = map[string]any{}
	}
	v["id"] = viewID
	v["team_id"] = team
	v["state"] = map[string]any{"values": values}
	v["hash"] = "156772938.1827394"
	return map[string]any{
		"type":       "view_submission",
		"team":       map[string]any{"id": team, "domain": "example"},
		"user":       map[string]any{"id": user, "username": userName, "name": userName, "team_id": team},
		"api_app_id": "A0SYNCMEDIC",
		"token":      "legacy-verification-token",
		"trigger_id": "12345.98765.abcd2358fdea",
		"view":       v,
	}
}
