package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/notify"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/remedy"
)

// slackInteractive reports whether the flags turn Slack's buttons on (Socket Mode or the HTTP request URL).
func (o *notifyOptions) slackInteractive() bool {
	return o.slackAppTokenFile != "" || o.slackSigningSecretFile != ""
}

// checkSlackInteractivity refuses interactivity flags that cannot work.
func (o *notifyOptions) checkSlackInteractivity() error {
	switch {
	case !o.slackInteractive():
		return nil
	case o.slackTokenFile == "":
		return errors.New("--slack-app-token-file and --slack-signing-secret-file need --slack-token-file: the buttons live in the bot's thread, and the bot token opens the dialogs")
	case o.slackAppTokenFile != "" && o.slackSigningSecretFile != "":
		return errors.New("give --slack-app-token-file (Socket Mode) or --slack-signing-secret-file (the HTTP request URL), not both: Slack delivers each click one way")
	}
	return nil
}

// checkSlackTeam, with --slack-team-id, asks auth.test whether token belongs to that workspace: a bot token of
// another workspace would post incidents there and take its members' clicks.
func (o *notifyOptions) checkSlackTeam(token string, client *http.Client) error {
	if o.slackTeamID == "" {
		return nil
	}
	opts := []slack.Option{slack.OptionHTTPClient(client)}
	if o.slackAPIURL != "" {
		opts = append(opts, slack.OptionAPIURL(o.slackAPIURL))
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := slacknotify.CheckTeam(ctx, slack.New(token, opts...), o.slackTeamID); err != nil {
		return fmt.Errorf("--slack-team-id %s: %w (give the ID of the workspace --slack-token-file's bot is installed in)", o.slackTeamID, err)
	}
	if o.log != nil {
		o.log.Info("slack: the bot token belongs to the pinned workspace", "team", o.slackTeamID)
	}
	return nil
}

// slackButtons says which buttons an incident's root message shows, each only where the policy could let a Slack
// member use it: Fix… when the rule has a remedy, is not off, and its fixBy has a Slack entry; Silence… when
// silenceBy has one; Acknowledge when ackBy has one (unset ackBy: fixBy's or silenceBy's).
func (o *notifyOptions) slackButtons(inc incident.Incident) slacknotify.Buttons {
	if o.policy == nil {
		return slacknotify.Buttons{}
	}
	pol := o.policy()
	r := pol.For(inc.Finding.Rule)
	b := slacknotify.Buttons{Silence: policy.SlackMayFix(pol.SilenceBy)}
	if pol.AckBy != nil {
		b.Acknowledge = policy.SlackMayFix(pol.AckBy)
	} else {
		b.Acknowledge = policy.SlackMayFix(r.FixBy) || b.Silence
	}
	b.Fix = inc.Finding.Remedy.Action != syncmedic.ActionNone && r.Mode != policy.ModeOff && policy.SlackMayFix(r.FixBy)
	return b
}

// slackReceiver is how serve receives clicks: the HTTP request URL handler, or the Socket Mode loop.
type slackReceiver struct {
	handler http.Handler
	socket  func(ctx context.Context) error
}

// slackInteractivity builds the receiver of clicks the flags ask for (nil: buttons off). ctx bounds the work a
// click starts after Slack was answered.
func (o *notifyOptions) slackInteractivity(ctx context.Context, actions slacknotify.Actions, log *slog.Logger) (*slackReceiver, error) {
	if !o.slackInteractive() {
		return nil, nil
	}
	// Each token and the signing secret are read again when their files change (a Secret updated in place): the bot
	// token at the next call, the app-level token at Socket Mode's next connection, the secret at the next click.
	bot, err := secretSource("--slack-token-file", o.slackTokenFile)
	if err != nil {
		return nil, err
	}
	var opts []slack.Option
	if o.slackAPIURL != "" {
		opts = append(opts, slack.OptionAPIURL(o.slackAPIURL))
	}
	var app func() string
	if o.slackAppTokenFile != "" {
		if app, err = secretSource("--slack-app-token-file", o.slackAppTokenFile); err != nil {
			return nil, err
		}
	}
	clients := slacknotify.NewClients(bot, app, notify.NewHTTPClient(o.timeout), opts...)
	log = log.With("component", "slack-interactivity")
	x, err := slacknotify.NewInteractions(ctx, slacknotify.InteractionOptions{Clients: clients.Client, Actions: actions, Log: log,
		Groups: slacknotify.UserGroups(clients.Client, time.Minute, time.Now), SilenceDurations: o.slackSilenceDurations, TeamID: o.slackTeamID})
	if err != nil {
		return nil, err
	}
	if app != nil {
		log.Info("slack buttons on: clicks arrive over Socket Mode (the leader opens the connection)")
		return &slackReceiver{socket: func(ctx context.Context) error { return x.RunSocketMode(ctx, clients.Client()) }}, nil
	}
	secret, err := secretSource("--slack-signing-secret-file", o.slackSigningSecretFile)
	if err != nil {
		return nil, err
	}
	h, err := slacknotify.NewHTTPReceiver(x, secret)
	if err != nil {
		return nil, err
	}
	log.Info("slack buttons on: Slack posts clicks to the request URL " + slacknotify.InteractionsPath + " on --listen")
	return &slackReceiver{handler: h}, nil
}

// whileLeading runs run while leading() holds, stopping it when leadership is lost and starting it again when it
// comes back, until ctx ends; a run that fails is started again after a pause. Only the leader opens the Socket
// Mode connection, so every click reaches the replica that may act on it.
func whileLeading(ctx context.Context, leading func() bool, run func(context.Context) error, log *slog.Logger) {
	const poll = time.Second
	for ctx.Err() == nil {
		if !leading() {
			sleepCtx(ctx, poll)
			continue
		}
		rctx, cancel := context.WithCancel(ctx)
		go func() {
			for rctx.Err() == nil && leading() {
				sleepCtx(rctx, poll)
			}
			cancel()
		}()
		err := run(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.Error("slack socket mode stopped: retrying in 10s", "error", err)
			sleepCtx(ctx, 10*time.Second)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// slackActions are the engine's verbs for a click in Slack, called in process: the fix on demand of the incident
// API (the same dry-run plan, confirm digest, fixBy, rate limit, kill switch and audit), and the tracker's
// acknowledgements and silences with the policy's ackBy and silenceBy, as the incident API checks them.
type slackActions struct {
	fix       func(ctx context.Context, id string, req remedy.FixRequest) (remedy.FixResult, error)
	onCall    onCall
	policy    func() *policy.Policy
	incidents func() []incident.Incident
	log       *slog.Logger
}

var _ slacknotify.Actions = slackActions{}

// Plan is the fix's dry-run for the clicker.
func (a slackActions) Plan(ctx context.Context, id string, by slacknotify.Clicker) (slacknotify.Plan, error) {
	c := by.Caller()
	res, err := a.fix(ctx, id, remedy.FixRequest{Caller: c})
	if err != nil {
		return slacknotify.Plan{}, a.refused(id, c, res, err)
	}
	return slackPlan(res), nil
}

// Apply applies the plan with digest, as the clicker asked.
func (a slackActions) Apply(ctx context.Context, id, digest string, by slacknotify.Clicker) (slacknotify.Outcome, error) {
	c := by.Caller()
	res, err := a.fix(ctx, id, remedy.FixRequest{Caller: c, Confirm: digest})
	if err != nil {
		return slacknotify.Outcome{}, a.refused(id, c, res, err)
	}
	return slacknotify.Outcome{Action: string(res.Action), Result: string(res.Result), Changed: res.Changed, Steps: res.Steps,
		Error: res.Error, RequestedBy: c.String()}, nil
}

// Acknowledge records that the clicker took the incident, as the policy's ackBy allows.
func (a slackActions) Acknowledge(ctx context.Context, id string, by slacknotify.Clicker) error {
	c := by.Caller()
	inc, err := a.open(id)
	if err != nil {
		return err
	}
	if _, ok := a.policy().MayAcknowledge(inc.Finding.Rule, c); !ok {
		return a.refuse("acknowledgement", id, c, "policy: "+c.String()+" may not acknowledge "+string(inc.Finding.Rule)+
			" (ackBy, or when it is unset the rule's fixBy and silenceBy)")
	}
	return engineRefusal(a.onCall.Acknowledge(ctx, id, slackName(by)))
}

// Silence silences incidents like id for d, as the policy's silenceBy allows.
func (a slackActions) Silence(ctx context.Context, id string, by slacknotify.Clicker, d time.Duration, comment string) error {
	c := by.Caller()
	if _, err := a.open(id); err != nil {
		return err
	}
	if _, ok := a.policy().MaySilence(c); !ok {
		return a.refuse("silence", id, c, "policy: "+c.String()+" may not create silences (silenceBy)")
	}
	return engineRefusal(a.onCall.Silence(ctx, id, slackName(by), d, comment))
}

// open returns the open incident id, or why not.
func (a slackActions) open(id string) (incident.Incident, error) {
	for _, inc := range a.incidents() {
		if inc.ID == id {
			if !inc.IsOpen() {
				return inc, &slacknotify.Refused{Msg: "incident " + id + " is resolved"}
			}
			return inc, nil
		}
	}
	return incident.Incident{}, &slacknotify.Refused{Msg: "no incident " + id}
}

func (a slackActions) refuse(what, id string, c policy.Caller, why string) error {
	a.log.Info(what+" refused", "incident", id, "who", c.String(), "why", why)
	return &slacknotify.Refused{Msg: why}
}

// slackName is how an acknowledgement or a silence records a Slack member: "slack user alice (U024BE7LH)".
func slackName(by slacknotify.Clicker) string {
	return strings.TrimSuffix(by.Caller().String(), " via slack")
}

// engineRefusal turns an error of the tracker's on-call verbs into what the clicker sees.
func engineRefusal(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, incident.ErrNotLeading), errors.Is(err, incident.ErrUnavailable):
		return &slacknotify.Refused{Msg: err.Error(), RetryAfter: 5 * time.Second}
	case errors.Is(err, incident.ErrNotFound), errors.Is(err, incident.ErrResolved), errors.Is(err, incident.ErrInvalid),
		errors.Is(err, incident.ErrLimited):
		return &slacknotify.Refused{Msg: err.Error()}
	}
	return err
}

// refused turns a refused fix into what the modal shows, with the new plan of a plan that changed, and logs it as
// the incident API does.
func (a slackActions) refused(id string, c policy.Caller, res remedy.FixResult, err error) error {
	fe, ok := remedy.IsFixError(err)
	if !ok {
		return err
	}
	a.log.Info("fix refused", "incident", id, "who", c.String(), "reason", fe.Code, "why", fe.Msg)
	r := &slacknotify.Refused{Msg: fe.Msg, RetryAfter: fe.RetryAfter}
	if fe.Code == remedy.FixConflict && res.Confirm != "" {
		p := slackPlan(res)
		r.Plan = &p
	}
	return r
}

func slackPlan(res remedy.FixResult) slacknotify.Plan {
	return slacknotify.Plan{Incident: res.Incident, Action: string(res.Action), Steps: res.Steps, Warnings: res.Warnings,
		Digest: res.Confirm, AllowedBy: res.AllowedBy}
}
