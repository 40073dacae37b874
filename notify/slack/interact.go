package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/slack-go/slack"

	"github.com/syncmedic/syncmedic/policy"
)

// Clicker is the Slack user behind a click, as Slack's signed (or Socket Mode) payload names them.
type Clicker struct {
	// UserID is the member ID (U…, W…), the only stable name; Name the user's name, Team the workspace ID.
	UserID, Name, Team string
	// Groups are the IDs (S…) of the user groups the user is in, when syncmedic could read them (usergroups:read).
	Groups []string
}

// Caller is the clicker as the policy's fixBy and the audit trail see them.
func (c Clicker) Caller() policy.Caller {
	return policy.Caller{SlackUser: c.UserID, SlackName: c.Name, SlackTeam: c.Team, SlackGroups: c.Groups, Via: "slack"}
}

// Plan is the dry-run of an incident's fix, as the Fix… modal shows it.
type Plan struct {
	Incident string
	Action   string
	// Steps are the exact API calls the fix makes; Warnings say what it does besides unblocking.
	Steps, Warnings []string
	// Digest identifies exactly this plan: Apply applies it only if the plan is still the same.
	Digest string
	// AllowedBy is the fixBy entry that lets the clicker fix.
	AllowedBy string
}

// Outcome is how an applied fix ended.
type Outcome struct {
	Action string
	// Result is succeeded or failed; Changed is false when there was nothing left to change.
	Result  string
	Changed bool
	Steps   []string
	Error   string
	// RequestedBy is the clicker as the attempt, the log line, the thread and the Kubernetes Event record them.
	RequestedBy string
}

// Refused is an action the policy or the moment does not allow; Msg says why in a sentence a person can act on.
type Refused struct {
	Msg string
	// Plan is the new plan when the plan changed since it was reviewed (nothing was applied).
	Plan *Plan
	// RetryAfter says when trying again may help (rate limit, not the leader); 0: retrying will not help.
	RetryAfter time.Duration
}

func (r *Refused) Error() string { return r.Msg }

// ErrNotAvailable is returned by the Actions a build of syncmedic does not have.
var ErrNotAvailable = errors.New("not available in this build of syncmedic")

// Actions is what a click in Slack needs from the engine. Every method checks the clicker's permission itself.
type Actions interface {
	// Plan returns the dry-run plan of the incident's fix and its digest, or a *Refused (not permitted, resolved…).
	Plan(ctx context.Context, incidentID string, by Clicker) (Plan, error)
	// Apply applies the plan with digest, or refuses with a *Refused; a plan that changed since carries the new one.
	Apply(ctx context.Context, incidentID, digest string, by Clicker) (Outcome, error)
	// Acknowledge records that by took the incident; a repeated click is not an error.
	Acknowledge(ctx context.Context, incidentID string, by Clicker) error
	// Silence silences incidents like this one for d.
	Silence(ctx context.Context, incidentID string, by Clicker, d time.Duration, comment string) error
}

// The callback IDs of syncmedic's modals.
const (
	CallbackFix     = "syncmedic.fix"
	CallbackSilence = "syncmedic.silence"
)

// The silence modal's inputs.
const (
	blockSilenceFor     = "silence.for"
	actionSilenceFor    = "silence.for"
	blockSilenceComment = "silence.comment"
	actionSilenceComm   = "silence.comment"
)

// DefaultSilenceDurations are the choices of the Silence… modal unless InteractionOptions.SilenceDurations says
// otherwise: 1 hour, 4 hours, 1 day and 7 days.
func DefaultSilenceDurations() []time.Duration {
	return []time.Duration{time.Hour, 4 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}
}

// InteractionOptions configure the receiver of clicks.
type InteractionOptions struct {
	// Client calls Slack with the bot token (views.open, views.update, chat.postEphemeral, usergroups.list).
	Client *slack.Client
	// Clients, when set, returns the client of the bot token of the moment at each call (Clients.Client: a token
	// file read again when its Secret is updated in place); Client is then unused.
	Clients func() *slack.Client
	Actions Actions
	// Groups returns the user group IDs of a user (nil: unknown, slack-group: entries match nobody).
	Groups func(ctx context.Context, userID string) ([]string, error)
	Log    *slog.Logger
	// Answer is how long a click waits for the engine before Slack is answered with a "working" view and the
	// result follows with views.update (default 2s: Slack wants its answer, and views.open its trigger, within 3s).
	Answer time.Duration
	// Timeout bounds the work a click starts (default 2m).
	Timeout time.Duration
	// SilenceDurations are the choices of the Silence… modal, the first preselected (default
	// DefaultSilenceDurations); a submission of any other duration is refused in the modal.
	SilenceDurations []time.Duration
	// TeamID, when set, is the only workspace (team.id) whose interactions are acted on; any other is refused and
	// logged.
	TeamID string
}

// Interactions receives the clicks on incident messages and modals, from Socket Mode or the HTTP request URL.
type Interactions struct {
	o InteractionOptions
	// base is the context the work of a click runs in once Slack has its answer (set by the caller's Run).
	base context.Context
}

// NewInteractions returns the receiver of clicks; ctx bounds the work clicks start after Slack was answered.
func NewInteractions(ctx context.Context, o InteractionOptions) (*Interactions, error) {
	if (o.Client == nil && o.Clients == nil) || o.Actions == nil {
		return nil, errors.New("slack interactivity: a bot token client and the actions are required")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Answer <= 0 {
		o.Answer = 2 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if len(o.SilenceDurations) == 0 {
		o.SilenceDurations = DefaultSilenceDurations()
	}
	for _, d := range o.SilenceDurations {
		if d <= 0 {
			return nil, fmt.Errorf("slack interactivity: silence duration %s: want a positive duration", d)
		}
	}
	return &Interactions{o: o, base: ctx}, nil
}

// client returns the client to call Slack with now.
func (x *Interactions) client() *slack.Client {
	if x.o.Clients != nil {
		return x.o.Clients()
	}
	return x.o.Client
}

// fixMeta is what the Fix… modal carries in its private_metadata.
type fixMeta struct {
	Incident string `json:"incident"`
	Digest   string `json:"digest,omitempty"`
	Channel  string `json:"channel,omitempty"`
}

// Handle processes one interaction payload and returns the answer Slack gets at once (a view_submission's
// response_action, or nil); the rest of the work goes on in the background.
func (x *Interactions) Handle(cb slack.InteractionCallback) any {
	if err := x.fromTeam(cb); err != nil {
		x.o.Log.Warn("slack: interaction refused", "reason", err.Error(), "user", cb.User.ID)
		return nil
	}
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		for _, a := range cb.ActionCallback.BlockActions {
			if a == nil {
				continue
			}
			x.blockAction(cb, *a)
		}
		return nil
	case slack.InteractionTypeViewSubmission:
		switch cb.View.CallbackID {
		case CallbackFix:
			return x.applyFix(cb)
		case CallbackSilence:
			return x.silence(cb)
		}
	}
	return nil
}

func (x *Interactions) blockAction(cb slack.InteractionCallback, a slack.BlockAction) {
	id := a.Value
	if id == "" {
		return
	}
	switch a.ActionID {
	case ActionFix:
		x.o.Log.Info("slack: fix clicked", "incident", id, "user", cb.User.ID)
		x.background(func(ctx context.Context) { x.openFix(ctx, cb, id) })
	case ActionAcknowledge:
		x.o.Log.Info("slack: acknowledge clicked", "incident", id, "user", cb.User.ID)
		x.background(func(ctx context.Context) {
			if err := x.o.Actions.Acknowledge(ctx, id, x.clicker(ctx, cb)); err != nil {
				x.tell(ctx, cb, ":no_entry: Cannot acknowledge incident `"+id+"`: "+escape(err.Error()))
			}
		})
	case ActionSilence:
		x.o.Log.Info("slack: silence clicked", "incident", id, "user", cb.User.ID)
		x.background(func(ctx context.Context) {
			meta, _ := json.Marshal(fixMeta{Incident: id, Channel: cb.Channel.ID})
			if _, err := x.client().OpenViewContext(ctx, cb.TriggerID, silenceView(id, string(meta), x.o.SilenceDurations)); err != nil {
				x.o.Log.Warn("slack: views.open failed", "incident", id, "error", err)
			}
		})
	}
}

// openFix opens the Fix… modal with the dry-run plan; a plan slower than Answer opens a "planning" modal first
// (the trigger expires 3s after the click) and replaces it once the plan is there.
func (x *Interactions) openFix(ctx context.Context, cb slack.InteractionCallback, id string) {
	done := make(chan slack.ModalViewRequest, 1)
	go func() {
		p, err := x.o.Actions.Plan(ctx, id, x.clicker(ctx, cb))
		done <- planView(id, cb.Channel.ID, p, err, false)
	}()
	var v slack.ModalViewRequest
	select {
	case v = <-done:
	case <-time.After(x.o.Answer):
		resp, err := x.client().OpenViewContext(ctx, cb.TriggerID, waitView("Planning the fix of incident `"+id+"` (a dry-run, nothing is changed)…"))
		if err != nil {
			x.o.Log.Warn("slack: views.open failed", "incident", id, "error", err)
			return
		}
		x.updateView(ctx, resp.ID, <-done)
		return
	}
	if _, err := x.client().OpenViewContext(ctx, cb.TriggerID, v); err != nil {
		x.o.Log.Warn("slack: views.open failed", "incident", id, "error", err)
	}
}

// applyFix answers Apply: the outcome, the new plan if it changed (response_action update), or, when the fix takes
// longer than Answer, an "applying" view that views.update replaces with the outcome.
func (x *Interactions) applyFix(cb slack.InteractionCallback) any {
	var m fixMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &m); err != nil || m.Incident == "" || m.Digest == "" {
		return slack.NewUpdateViewSubmissionResponse(ptr(refusedView("This Fix… dialog carries no plan: close it and click Fix… again.")))
	}
	x.o.Log.Info("slack: fix applied", "incident", m.Incident, "user", cb.User.ID, "confirm", m.Digest)
	done := make(chan slack.ModalViewRequest, 1)
	x.background(func(ctx context.Context) {
		out, err := x.o.Actions.Apply(ctx, m.Incident, m.Digest, x.clicker(ctx, cb))
		var r *Refused
		if errors.As(err, &r) && r.Plan != nil {
			done <- planView(m.Incident, m.Channel, *r.Plan, nil, true)
			return
		}
		done <- outcomeView(m.Incident, out, err)
	})
	select {
	case v := <-done:
		return slack.NewUpdateViewSubmissionResponse(&v)
	case <-time.After(x.o.Answer):
		viewID := cb.View.ID
		x.background(func(ctx context.Context) { x.updateView(ctx, viewID, <-done) })
		return slack.NewUpdateViewSubmissionResponse(ptr(waitView("Applying the fix of incident `" + m.Incident + "`… the result shows here and in the thread.")))
	}
}

// silence answers the Silence… modal's submission: closed when the silence is made, its error next to the
// comment when not, and an ephemeral message when the engine answers after Slack's deadline.
func (x *Interactions) silence(cb slack.InteractionCallback) any {
	var m fixMeta
	_ = json.Unmarshal([]byte(cb.View.PrivateMetadata), &m)
	d, err := time.ParseDuration(cb.View.State.Values[blockSilenceFor][actionSilenceFor].SelectedOption.Value)
	if m.Incident == "" || err != nil || !slices.Contains(x.o.SilenceDurations, d) {
		return slack.NewErrorsViewSubmissionResponse(map[string]string{blockSilenceFor: "choose how long to silence"})
	}
	comment := cb.View.State.Values[blockSilenceComment][actionSilenceComm].Value
	done := make(chan error, 1)
	x.background(func(ctx context.Context) {
		done <- x.o.Actions.Silence(ctx, m.Incident, x.clicker(ctx, cb), d, comment)
	})
	select {
	case err := <-done:
		if err != nil {
			return slack.NewErrorsViewSubmissionResponse(map[string]string{blockSilenceComment: clip(err.Error(), 150)})
		}
		return slack.NewClearViewSubmissionResponse()
	case <-time.After(x.o.Answer):
		cb.Channel.ID = m.Channel
		x.background(func(ctx context.Context) {
			if err := <-done; err != nil {
				x.tell(ctx, cb, ":no_entry: Cannot silence incident `"+m.Incident+"`: "+escape(err.Error()))
			}
		})
		return slack.NewClearViewSubmissionResponse()
	}
}

// clicker names the user of cb, with their user groups when Groups can tell them.
func (x *Interactions) clicker(ctx context.Context, cb slack.InteractionCallback) Clicker {
	c := Clicker{UserID: cb.User.ID, Name: cb.User.Name, Team: cb.Team.ID}
	if c.Team == "" {
		c.Team = cb.User.TeamID
	}
	if x.o.Groups != nil && c.UserID != "" {
		gs, err := x.o.Groups(ctx, c.UserID)
		if err != nil {
			x.o.Log.Warn("slack: cannot read the user's user groups (slack-group: entries of fixBy match nobody): give the app the usergroups:read scope", "user", c.UserID, "error", err)
		}
		c.Groups = gs
	}
	return c
}

func (x *Interactions) updateView(ctx context.Context, viewID string, v slack.ModalViewRequest) {
	if _, err := x.client().UpdateViewContext(ctx, v, "", "", viewID); err != nil {
		x.o.Log.Warn("slack: views.update failed", "view", viewID, "error", err)
	}
}

// tell sends the clicker a message only they see, in the channel they clicked in.
func (x *Interactions) tell(ctx context.Context, cb slack.InteractionCallback, text string) {
	if cb.Channel.ID == "" || cb.User.ID == "" {
		x.o.Log.Warn("slack: cannot tell the user", "user", cb.User.ID, "message", text)
		return
	}
	if _, err := x.client().PostEphemeralContext(ctx, cb.Channel.ID, cb.User.ID, slack.MsgOptionText(text, false)); err != nil {
		x.o.Log.Warn("slack: chat.postEphemeral failed", "error", err)
	}
}

// background runs fn after Slack was answered, bounded by Timeout.
func (x *Interactions) background(fn func(ctx context.Context)) {
	go func() {
		ctx, cancel := context.WithTimeout(x.base, x.o.Timeout)
		defer cancel()
		fn(ctx)
	}()
}

// planView is the Fix… modal: the plan with Apply, or why the clicker may not fix. changed says the plan changed
// since the clicker reviewed it.
func planView(id, channel string, p Plan, err error, changed bool) slack.ModalViewRequest {
	if err != nil {
		return refusedView(refusalText(id, err))
	}
	meta, _ := json.Marshal(fixMeta{Incident: id, Digest: p.Digest, Channel: channel})
	var blocks []slack.Block
	if changed {
		blocks = append(blocks, slack.NewSectionBlock(md(":arrows_counterclockwise: *The plan changed since you reviewed it* (the object or the finding moved): nothing was applied. Review the new plan."), nil, nil))
	}
	blocks = append(blocks,
		slack.NewSectionBlock(md(clip(fmt.Sprintf("Apply `%s` to incident `%s`. A dry-run gave these exact calls:", escape(p.Action), escape(id)), maxSectionText)), nil, nil),
		slack.NewSectionBlock(md(codeBlock("", p.Steps)), nil, nil))
	for _, w := range p.Warnings {
		blocks = append(blocks, slack.NewSectionBlock(md(clip(":warning: "+escape(w), maxSectionText)), nil, nil))
	}
	blocks = append(blocks, slack.NewContextBlock("", md(clip(fmt.Sprintf("Allowed by fixBy `%s`. *Apply* applies exactly this plan (`%s`); if it changed meanwhile you see the new one first.", escape(p.AllowedBy), p.Digest), maxSectionText))))
	return slack.ModalViewRequest{Type: slack.VTModal, CallbackID: CallbackFix, Title: plain("Fix incident"), Submit: plain("Apply"),
		Close: plain("Cancel"), PrivateMetadata: string(meta), Blocks: slack.Blocks{BlockSet: blocks}}
}

func refusalText(id string, err error) string {
	var r *Refused
	if errors.As(err, &r) {
		s := ":no_entry: " + escape(r.Msg)
		if r.RetryAfter > 0 {
			s += fmt.Sprintf(" (try again in %s)", r.RetryAfter.Round(time.Second))
		}
		return s
	}
	return fmt.Sprintf(":x: Cannot fix incident `%s`: %s", escape(id), escape(err.Error()))
}

func refusedView(text string) slack.ModalViewRequest {
	return slack.ModalViewRequest{Type: slack.VTModal, CallbackID: CallbackFix, Title: plain("Fix incident"), Close: plain("Close"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewSectionBlock(md(clip(text, maxSectionText)), nil, nil)}}}
}

func waitView(text string) slack.ModalViewRequest {
	return slack.ModalViewRequest{Type: slack.VTModal, CallbackID: CallbackFix, Title: plain("Fix incident"), Close: plain("Close"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewSectionBlock(md(":hourglass_flowing_sand: "+text), nil, nil)}}}
}

// outcomeView shows how Apply ended.
func outcomeView(id string, out Outcome, err error) slack.ModalViewRequest {
	if err != nil {
		return refusedView(refusalText(id, err))
	}
	var text string
	switch out.Result {
	case "succeeded":
		what := "changed"
		if !out.Changed {
			what = "nothing to change: already applied"
		}
		text = fmt.Sprintf(":white_check_mark: `%s` succeeded (%s).", escape(out.Action), what)
	default:
		text = fmt.Sprintf(":x: `%s` %s: %s", escape(out.Action), escape(out.Result), escape(out.Error))
	}
	text += "\nRequested by " + escape(out.RequestedBy) + "; the thread has the record." + bullets(out.Steps)
	return refusedView(text)
}

// silenceView is the Silence… modal: how long (one of durations), and why.
func silenceView(id, meta string, durations []time.Duration) slack.ModalViewRequest {
	var opts []*slack.OptionBlockObject
	for _, d := range durations {
		opts = append(opts, slack.NewOptionBlockObject(d.String(), plain(humanFor(d)), nil))
	}
	sel := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, plain("How long"), actionSilenceFor, opts...)
	sel.InitialOption = opts[0]
	comment := slack.NewPlainTextInputBlockElement(plain("Why (shown with the silence)"), actionSilenceComm)
	commentBlock := slack.NewInputBlock(blockSilenceComment, plain("Comment"), nil, comment)
	commentBlock.Optional = true
	return slack.ModalViewRequest{Type: slack.VTModal, CallbackID: CallbackSilence, Title: plain("Silence"), Submit: plain("Silence"),
		Close: plain("Cancel"), PrivateMetadata: meta, Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewSectionBlock(md("Silence incidents like `"+escape(id)+"` (same rule and object): still tracked and shown, not announced and not fixed automatically until the silence ends."), nil, nil),
			slack.NewInputBlock(blockSilenceFor, plain("For"), nil, sel),
			commentBlock,
		}}}
}

// humanFor names a choice of the Silence… modal: "7 days", "1 day", "4 hours", "1 hour", "30 minutes", "20
// seconds", or the Go duration for anything else ("1h30m0s").
func humanFor(d time.Duration) string {
	for _, u := range []struct {
		unit        time.Duration
		one, plural string
	}{{24 * time.Hour, "1 day", "%d days"}, {time.Hour, "1 hour", "%d hours"}, {time.Minute, "1 minute", "%d minutes"}, {time.Second, "1 second", "%d seconds"}} {
		switch {
		case d == u.unit:
			return u.one
		case d%u.unit == 0 && d > u.unit:
			return fmt.Sprintf(u.plural, d/u.unit)
		}
	}
	return d.String()
}

func ptr[T any](v T) *T { return &v }
