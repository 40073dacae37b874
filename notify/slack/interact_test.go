package slack

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
)

const (
	signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	incidentID    = "a0f934c178bf3f61-1773144000"
	permitted     = "U024BE7LH"
	outsider      = "U0OUTSIDE"
)

// fakeActions is the engine as a click sees it: it lets permitted (or a member of group S0SRE) fix, and records
// every call.
type fakeActions struct {
	mu      sync.Mutex
	digest  string
	calls   []string
	by      []Clicker
	slow    time.Duration
	ackErr  error
	silence []string
}

func (f *fakeActions) record(call string, by Clicker) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	f.by = append(f.by, by)
}

func (f *fakeActions) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeActions) allowed(by Clicker) (string, bool) {
	if by.UserID == permitted {
		return "slack:" + permitted, true
	}
	for _, g := range by.Groups {
		if g == "S0SRE" {
			return "slack-group:S0SRE", true
		}
	}
	return "", false
}

func (f *fakeActions) plan(by Clicker) Plan {
	f.mu.Lock()
	defer f.mu.Unlock()
	allowed, _ := f.allowed(by)
	return Plan{Incident: incidentID, Action: "argocd/remove-hook-finalizer", Digest: f.digest, AllowedBy: allowed,
		Steps:    []string{"PatchResource batch/Job shop/migrate: test + remove finalizers/0"},
		Warnings: []string{"This starts a new sync: every hook of the application runs again."}}
}

func (f *fakeActions) Plan(_ context.Context, id string, by Clicker) (Plan, error) {
	f.record("plan "+id, by)
	if _, ok := f.allowed(by); !ok {
		return Plan{}, &Refused{Msg: "policy: slack user " + by.UserID + " via slack is not in fixBy (slack:" + permitted + ") for argocd/hook-finalizer-stuck"}
	}
	return f.plan(by), nil
}

func (f *fakeActions) Apply(_ context.Context, id, digest string, by Clicker) (Outcome, error) {
	f.record("apply "+id+" "+digest, by)
	f.mu.Lock()
	slow := f.slow
	f.mu.Unlock()
	time.Sleep(slow)
	if _, ok := f.allowed(by); !ok {
		return Outcome{}, &Refused{Msg: "policy: not in fixBy"}
	}
	if p := f.plan(by); digest != p.Digest {
		return Outcome{}, &Refused{Msg: "the plan changed", Plan: &p}
	}
	return Outcome{Action: "argocd/remove-hook-finalizer", Result: "succeeded", Changed: true, RequestedBy: by.Caller().String(),
		Steps: []string{"PatchResource batch/Job shop/migrate: test + remove finalizers/0"}}, nil
}

func (f *fakeActions) Acknowledge(_ context.Context, id string, by Clicker) error {
	f.record("acknowledge "+id, by)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ackErr
}

func (f *fakeActions) Silence(_ context.Context, id string, by Clicker, d time.Duration, comment string) error {
	f.record("silence "+id+" "+d.String()+" "+comment, by)
	return nil
}

// way delivers an interaction payload as Slack does in one of its two ways and returns the answer Slack gets.
type way struct {
	name    string
	deliver func(t *testing.T, payload any) json.RawMessage
}

// clickRig is a fake Slack, the receiver of clicks under test, and the two ways to reach it.
type clickRig struct {
	srv     *slackrec.Server
	actions *fakeActions
	x       *Interactions
	http    *httptest.Server
	ways    []way
}

func newInteractionRig(t *testing.T, answer time.Duration) *clickRig {
	t.Helper()
	return newInteractionRigWith(t, answer, nil)
}

// newInteractionRigWith is newInteractionRig with configure (when not nil) applied to the options.
func newInteractionRigWith(t *testing.T, answer time.Duration, configure func(*InteractionOptions)) *clickRig {
	t.Helper()
	srv := slackrec.New(t)
	srv.SetUserGroups(map[string][]string{"S0SRE": {"U0SREMEMBER"}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := slack.New(testToken, slack.OptionAPIURL(srv.GetAPIURL()), slack.OptionAppLevelToken(slackrec.AppToken))
	r := &clickRig{srv: srv, actions: &fakeActions{digest: "sha256:first"}}
	var err error
	o := InteractionOptions{Client: client, Actions: r.actions, Answer: answer, Log: slog.New(slog.DiscardHandler),
		Groups: UserGroups(func() *slack.Client { return client }, time.Minute, time.Now)}
	if configure != nil {
		configure(&o)
	}
	r.x, err = NewInteractions(ctx, o)
	require.NoError(t, err)
	recv, err := NewHTTPReceiver(r.x, func() string { return signingSecret })
	require.NoError(t, err)
	r.http = httptest.NewServer(recv)
	t.Cleanup(r.http.Close)
	sockDone := make(chan error, 1)
	go func() { sockDone <- r.x.RunSocketMode(ctx, client) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-sockDone:
		case <-time.After(5 * time.Second):
			t.Error("socket mode did not stop")
		}
	})
	require.NoError(t, srv.WaitSocket(10*time.Second))
	envelope := 0
	r.ways = []way{
		{"socket mode", func(t *testing.T, payload any) json.RawMessage {
			envelope++
			ack, err := srv.Deliver("env-"+strconv.Itoa(envelope), payload, 5*time.Second)
			require.NoError(t, err)
			return ack.Payload
		}},
		{"http request URL", func(t *testing.T, payload any) json.RawMessage {
			body := slackrec.FormBody(payload)
			code, answer, err := slackrec.PostInteraction(r.http.URL+InteractionsPath, slackrec.Sign(signingSecret, time.Now(), body), body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, code, answer)
			if answer == "" {
				return nil
			}
			return json.RawMessage(answer)
		}},
	}
	return r
}

// view waits for the n-th views.* call and returns it with its view decoded.
func (r *clickRig) view(t *testing.T, n int) (slackrec.Message, slack.ModalViewRequest) {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.srv.Views()) >= n }, 5*time.Second, 10*time.Millisecond, "views: %+v", r.srv.Views())
	m := r.srv.Views()[n-1]
	var v slack.ModalViewRequest
	require.NoError(t, json.Unmarshal([]byte(m.View), &v))
	return m, v
}

func viewText(t *testing.T, v slack.ModalViewRequest) string {
	t.Helper()
	b, err := json.Marshal(v.Blocks)
	require.NoError(t, err)
	return string(b)
}

func answerView(t *testing.T, answer json.RawMessage) (string, slack.ModalViewRequest) {
	t.Helper()
	var resp struct {
		ResponseAction string                 `json:"response_action"`
		View           slack.ModalViewRequest `json:"view"`
	}
	require.NoError(t, json.Unmarshal(answer, &resp), string(answer))
	return resp.ResponseAction, resp.View
}

func TestFixFromSlackOpensThePlanAndAppliesExactlyIt(t *testing.T) {
	for i, name := range []string{"socket mode", "http request URL"} {
		t.Run(name, func(t *testing.T) {
			r := newInteractionRig(t, 2*time.Second)
			deliver := r.ways[i].deliver
			require.Nil(t, deliver(t, slackrec.BlockActions(permitted, "alice", "T0001", "C0INC", "1710072000.000001", ActionFix, incidentID, "trig-1")))
			m, v := r.view(t, 1)
			require.Equal(t, "views.open", m.Method)
			require.Equal(t, "trig-1", m.TriggerID, "the modal opens with the click's trigger")
			require.Equal(t, CallbackFix, v.CallbackID)
			require.Equal(t, "Apply", v.Submit.Text)
			text := viewText(t, v)
			require.Contains(t, text, "PatchResource batch/Job shop/migrate: test + remove finalizers/0", "the exact calls")
			require.Contains(t, text, "every hook of the application runs again", "the warnings")
			require.Contains(t, text, "slack:"+permitted)
			require.Equal(t, []string{"plan " + incidentID}, r.actions.Calls(), "a click only plans")

			answer := deliver(t, slackrec.ViewSubmission(permitted, "alice", "T0001", m.ViewID, json.RawMessage(m.View), map[string]any{}))
			action, out := answerView(t, answer)
			require.Equal(t, "update", action)
			require.Contains(t, viewText(t, out), "succeeded (changed)")
			require.Contains(t, viewText(t, out), "Requested by slack user alice ("+permitted+") via slack")
			require.Nil(t, out.Submit, "the outcome has nothing left to submit")
			require.Equal(t, []string{"plan " + incidentID, "apply " + incidentID + " sha256:first"}, r.actions.Calls(), "Apply confirms the digest the modal showed")
			require.Equal(t, Clicker{UserID: permitted, Name: "alice", Team: "T0001"}, r.actions.by[1])
		})
	}
}

func TestFixFromSlackRefusesAUserOutsideFixByInTheModal(t *testing.T) {
	for i, name := range []string{"socket mode", "http request URL"} {
		t.Run(name, func(t *testing.T) {
			r := newInteractionRig(t, 2*time.Second)
			r.ways[i].deliver(t, slackrec.BlockActions(outsider, "mallory", "T0001", "C0INC", "1710072000.000001", ActionFix, incidentID, "trig-2"))
			_, v := r.view(t, 1)
			require.Nil(t, v.Submit, "no Apply button")
			require.Contains(t, viewText(t, v), "is not in fixBy")
			require.Empty(t, v.PrivateMetadata, "no plan to confirm")
			t.Run("a forged submission of the modal applies nothing the policy refuses", func(t *testing.T) {
				meta, _ := json.Marshal(fixMeta{Incident: incidentID, Digest: "sha256:first"})
				view, _ := json.Marshal(map[string]any{"callback_id": CallbackFix, "private_metadata": string(meta), "type": "modal"})
				answer := r.ways[i].deliver(t, slackrec.ViewSubmission(outsider, "mallory", "T0001", "V1", view, map[string]any{}))
				_, out := answerView(t, answer)
				require.Contains(t, viewText(t, out), "not in fixBy")
			})
		})
	}
	t.Run("a member of a user group fixBy names may: its groups are read with usergroups.list", func(t *testing.T) {
		r := newInteractionRig(t, 2*time.Second)
		r.ways[0].deliver(t, slackrec.BlockActions("U0SREMEMBER", "sam", "T0001", "C0INC", "1710072000.000001", ActionFix, incidentID, "trig-3"))
		_, v := r.view(t, 1)
		require.Equal(t, "Apply", v.Submit.Text)
		require.Contains(t, viewText(t, v), "slack-group:S0SRE")
		require.Equal(t, []string{"S0SRE"}, r.actions.by[0].Groups)
	})
}

func TestFixFromSlackShowsTheNewPlanWhenItChanged(t *testing.T) {
	r := newInteractionRig(t, 2*time.Second)
	for _, w := range r.ways {
		t.Run(w.name, func(t *testing.T) {
			r.actions.mu.Lock()
			r.actions.digest = "sha256:first"
			r.actions.mu.Unlock()
			n := len(r.srv.Views())
			w.deliver(t, slackrec.BlockActions(permitted, "alice", "T0001", "C0INC", "1710072000.000001", ActionFix, incidentID, "trig"))
			m, _ := r.view(t, n+1)
			r.actions.mu.Lock()
			r.actions.digest = "sha256:second" // the object moved while the modal was open
			r.actions.mu.Unlock()
			action, out := answerView(t, w.deliver(t, slackrec.ViewSubmission(permitted, "alice", "T0001", m.ViewID, json.RawMessage(m.View), nil)))
			require.Equal(t, "update", action)
			require.Contains(t, viewText(t, out), "The plan changed since you reviewed it")
			require.Equal(t, "Apply", out.Submit.Text)
			var meta fixMeta
			require.NoError(t, json.Unmarshal([]byte(out.PrivateMetadata), &meta))
			require.Equal(t, "sha256:second", meta.Digest, "Apply now confirms the new plan")
			action, out = answerView(t, w.deliver(t, slackrec.ViewSubmission(permitted, "alice", "T0001", m.ViewID, mustJSON(t, out), nil)))
			require.Equal(t, "update", action)
			require.Contains(t, viewText(t, out), "succeeded")
		})
	}
}

func TestASlowFixAnswersSlackAtOnceAndUpdatesTheModal(t *testing.T) {
	r := newInteractionRig(t, 50*time.Millisecond)
	r.actions.slow = 500 * time.Millisecond
	r.ways[1].deliver(t, slackrec.BlockActions(permitted, "alice", "T0001", "C0INC", "1710072000.000001", ActionFix, incidentID, "trig"))
	m, _ := r.view(t, 1)
	start := time.Now()
	action, out := answerView(t, r.ways[1].deliver(t, slackrec.ViewSubmission(permitted, "alice", "T0001", m.ViewID, json.RawMessage(m.View), nil)))
	require.Less(t, time.Since(start), 400*time.Millisecond, "Slack is answered before the fix ends")
	require.Equal(t, "update", action)
	require.Contains(t, viewText(t, out), "Applying the fix")
	upd, v := r.view(t, 2)
	require.Equal(t, "views.update", upd.Method)
	require.Equal(t, m.ViewID, upd.ViewID)
	require.Contains(t, viewText(t, v), "succeeded (changed)")
}

func TestAcknowledgeAndSilenceFromSlack(t *testing.T) {
	r := newInteractionRig(t, 2*time.Second)
	for _, w := range r.ways {
		t.Run(w.name+": acknowledge records the clicker", func(t *testing.T) {
			n := len(r.actions.Calls())
			require.Nil(t, w.deliver(t, slackrec.BlockActions(permitted, "alice", "T0001", "C0INC", "1710072000.000001", ActionAcknowledge, incidentID, "trig")))
			require.Eventually(t, func() bool { return len(r.actions.Calls()) == n+1 }, 5*time.Second, 10*time.Millisecond)
			require.Equal(t, "acknowledge "+incidentID, r.actions.Calls()[n])
		})
	}
	t.Run("an engine without acknowledgements tells the clicker, only them", func(t *testing.T) {
		r.actions.mu.Lock()
		r.actions.ackErr = ErrNotAvailable
		r.actions.mu.Unlock()
		r.ways[0].deliver(t, slackrec.BlockActions(permitted, "alice", "T0001", "C0INC", "1710072000.000001", ActionAcknowledge, incidentID, "trig"))
		require.Eventually(t, func() bool { return len(r.srv.Ephemerals()) == 1 }, 5*time.Second, 10*time.Millisecond)
		e := r.srv.Ephemerals()[0]
		require.Equal(t, permitted, e.User)
		require.Equal(t, "C0INC", e.Channel)
		require.Contains(t, e.Text, "not available in this build")
	})
	for _, w := range r.ways {
		t.Run(w.name+": silence asks how long and why, then silences", func(t *testing.T) {
			n := len(r.srv.Views())
			w.deliver(t, slackrec.BlockActions(permitted, "alice", "T0001", "C0INC", "1710072000.000001", ActionSilence, incidentID, "trig"))
			m, v := r.view(t, n+1)
			require.Equal(t, CallbackSilence, v.CallbackID)
			values := map[string]any{
				blockSilenceFor:     map[string]any{actionSilenceFor: map[string]any{"type": "static_select", "selected_option": map[string]any{"value": "4h0m0s", "text": map[string]any{"type": "plain_text", "text": "4 hours"}}}},
				blockSilenceComment: map[string]any{actionSilenceComm: map[string]any{"type": "plain_text_input", "value": "migration runs long tonight"}},
			}
			action, _ := answerView(t, w.deliver(t, slackrec.ViewSubmission(permitted, "alice", "T0001", m.ViewID, json.RawMessage(m.View), values)))
			require.Equal(t, "clear", action)
			calls := r.actions.Calls()
			require.Equal(t, "silence "+incidentID+" 4h0m0s migration runs long tonight", calls[len(calls)-1])
		})
	}
}

// TestTheSilenceDialogOffersOnlyItsChoices: the Silence… dialog offers the configured durations (1 hour to 7 days
// by default), named for people, and a submission of a duration it did not offer (a stale dialog, a forged
// payload) is refused in the dialog and silences nothing.
func TestTheSilenceDialogOffersOnlyItsChoices(t *testing.T) {
	for _, tc := range []struct {
		name      string
		durations []time.Duration
		options   []string
		submit    string
		refused   bool
	}{
		{name: "default choices", options: []string{"1h0m0s=1 hour", "4h0m0s=4 hours", "24h0m0s=1 day", "168h0m0s=7 days"}, submit: "24h0m0s"},
		{name: "a duration the default dialog does not offer", options: []string{"1h0m0s=1 hour", "4h0m0s=4 hours", "24h0m0s=1 day", "168h0m0s=7 days"}, submit: "20s", refused: true},
		{name: "configured choices", durations: []time.Duration{20 * time.Second, 90 * time.Minute, 48 * time.Hour},
			options: []string{"20s=20 seconds", "1h30m0s=90 minutes", "48h0m0s=2 days"}, submit: "20s"},
		{name: "a default choice the configured dialog does not offer", durations: []time.Duration{20 * time.Second},
			options: []string{"20s=20 seconds"}, submit: "1h0m0s", refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newInteractionRigWith(t, 2*time.Second, func(o *InteractionOptions) { o.SilenceDurations = tc.durations })
			w := r.ways[0]
			w.deliver(t, slackrec.BlockActions(permitted, "alice", "T0001", "C0INC", "1710072000.000001", ActionSilence, incidentID, "trig"))
			m, _ := r.view(t, 1)
			var v struct {
				Blocks []struct {
					Element struct {
						Options []struct {
							Value string `json:"value"`
							Text  struct {
								Text string `json:"text"`
							} `json:"text"`
						} `json:"options"`
						InitialOption struct {
							Value string `json:"value"`
						} `json:"initial_option"`
					} `json:"element"`
				} `json:"blocks"`
			}
			require.NoError(t, json.Unmarshal([]byte(m.View), &v))
			var got []string
			for _, o := range v.Blocks[1].Element.Options {
				got = append(got, o.Value+"="+o.Text.Text)
			}
			require.Equal(t, tc.options, got)
			require.Equal(t, strings.Split(tc.options[0], "=")[0], v.Blocks[1].Element.InitialOption.Value, "the first choice is preselected")
			values := map[string]any{
				blockSilenceFor:     map[string]any{actionSilenceFor: map[string]any{"type": "static_select", "selected_option": map[string]any{"value": tc.submit}}},
				blockSilenceComment: map[string]any{actionSilenceComm: map[string]any{"type": "plain_text_input", "value": "deploy freeze"}},
			}
			n := len(r.actions.Calls())
			answer := w.deliver(t, slackrec.ViewSubmission(permitted, "alice", "T0001", m.ViewID, json.RawMessage(m.View), values))
			action, _ := answerView(t, answer)
			if tc.refused {
				require.Equal(t, "errors", action)
				require.Contains(t, string(answer), "choose how long to silence")
				time.Sleep(100 * time.Millisecond)
				require.Len(t, r.actions.Calls(), n, "nothing is silenced")
				return
			}
			require.Equal(t, "clear", action)
			d, err := time.ParseDuration(tc.submit)
			require.NoError(t, err)
			require.Equal(t, "silence "+incidentID+" "+d.String()+" deploy freeze", r.actions.Calls()[len(r.actions.Calls())-1])
		})
	}
}

func TestNewInteractionsRefusesANonPositiveSilenceDuration(t *testing.T) {
	_, err := NewInteractions(context.Background(), InteractionOptions{Client: slack.New("xoxb-x"), Actions: &fakeActions{},
		SilenceDurations: []time.Duration{time.Hour, 0}})
	require.ErrorContains(t, err, "silence duration 0s: want a positive duration")
}

func TestHTTPInteractionsAreRefusedUnlessSlackSignedThemOnce(t *testing.T) {
	r := newInteractionRig(t, 2*time.Second)
	body := slackrec.FormBody(slackrec.BlockActions(permitted, "alice", "T0001", "C0INC", "1710072000.000001", ActionFix, incidentID, "trig"))
	target := r.http.URL + InteractionsPath
	for _, tc := range []struct {
		name   string
		header http.Header
	}{
		{"no signature", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}},
		{"a signature with the wrong secret", slackrec.Sign("not-the-secret", time.Now(), body)},
		{"a signature over another body", slackrec.Sign(signingSecret, time.Now(), append([]byte("x"), body...))},
		{"a timestamp six minutes old", slackrec.Sign(signingSecret, time.Now().Add(-6*time.Minute), body)},
		{"a timestamp six minutes ahead", slackrec.Sign(signingSecret, time.Now().Add(6*time.Minute), body)},
	} {
		t.Run(tc.name+" is 401 and nothing is done", func(t *testing.T) {
			code, _, err := slackrec.PostInteraction(target, tc.header, body)
			require.NoError(t, err)
			require.Equal(t, http.StatusUnauthorized, code)
		})
	}
	time.Sleep(100 * time.Millisecond)
	require.Empty(t, r.actions.Calls())
	require.Empty(t, r.srv.Views())
	t.Run("a replayed request is 401 and done once only", func(t *testing.T) {
		h := slackrec.Sign(signingSecret, time.Now(), body)
		code, _, err := slackrec.PostInteraction(target, h, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
		code, _, err = slackrec.PostInteraction(target, h, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, code)
		r.view(t, 1)
		time.Sleep(200 * time.Millisecond)
		require.Len(t, r.srv.Views(), 1)
		require.Equal(t, []string{"plan " + incidentID}, r.actions.Calls())
	})
	t.Run("a signed request that is not an interaction is 400", func(t *testing.T) {
		junk := []byte("payload=%7B%22type%22%3A%22shortcut%22%7D")
		code, _, err := slackrec.PostInteraction(target, slackrec.Sign(signingSecret, time.Now(), junk), junk)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, code)
	})
}

func TestDecodeInteraction(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		err  string
	}{
		{"block_actions", string(slackrec.FormBody(slackrec.BlockActions(permitted, "a", "T", "C", "1.2", ActionFix, incidentID, "t"))), ""},
		{"not form-encoded", "%zz", "not form-encoded"},
		{"no payload", "foo=bar", "no payload"},
		{"not JSON", "payload=%7B", "not valid JSON"},
		{"another kind", "payload=%7B%22type%22%3A%22message_action%22%2C%22user%22%3A%7B%22id%22%3A%22U1%22%7D%7D", "block_actions and view_submission only"},
		{"no user", "payload=%7B%22type%22%3A%22block_actions%22%7D", "names no user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeInteraction([]byte(tc.body))
			if tc.err == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.err)
			}
		})
	}
}

func FuzzDecodeInteraction(f *testing.F) {
	f.Add(slackrec.FormBody(slackrec.BlockActions(permitted, "alice", "T0001", "C0INC", "1.2", ActionFix, incidentID, "trig")))
	f.Add(slackrec.FormBody(slackrec.ViewSubmission(permitted, "alice", "T0001", "V1", json.RawMessage(`{"callback_id":"syncmedic.fix","private_metadata":"{}"}`), nil)))
	f.Add([]byte("payload=%7B%22type%22%3A%22block_actions%22%7D"))
	f.Fuzz(func(t *testing.T, body []byte) {
		cb, err := DecodeInteraction(body)
		if err != nil {
			return
		}
		if cb.Type != slack.InteractionTypeBlockActions && cb.Type != slack.InteractionTypeViewSubmission {
			t.Fatalf("decoded an interaction of type %q", cb.Type)
		}
		if cb.User.ID == "" {
			t.Fatal("decoded an interaction without a user")
		}
		// Whatever decodes is handled without panicking, even with nothing behind it.
		x := &Interactions{o: InteractionOptions{Client: slack.New("xoxb-fuzz", slack.OptionAPIURL("http://127.0.0.1:1/")), Actions: &fakeActions{},
			Log: slog.New(slog.DiscardHandler), Answer: time.Millisecond, Timeout: time.Millisecond}, base: context.Background()}
		_ = x.Handle(cb)
	})
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
