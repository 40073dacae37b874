package slack

import (
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
)

// maxSectionText is Slack's limit for a section's text; longer evidence is cut with a note.
const maxSectionText = 3000

var stateLabel = map[incident.IncidentState]string{
	incident.StateFiring:      ":red_circle: Firing",
	incident.StateRemediating: ":large_yellow_circle: Remediating",
	incident.StateResolved:    ":large_green_circle: Resolved",
}

// The action IDs of the root message's buttons; each button's value is the incident ID.
const (
	ActionFix         = "syncmedic.fix"
	ActionAcknowledge = "syncmedic.acknowledge"
	ActionSilence     = "syncmedic.silence"
	// BlockActions is the block ID of the actions block that holds them.
	BlockActions = "syncmedic.actions"
)

// Buttons says which action buttons the root message of an open incident shows; the zero value shows none (Slack
// interactivity off).
type Buttons struct {
	// Fix shows Fix…: the rule has a remedy and the policy's fixBy has a Slack entry that may allow someone.
	Fix bool
	// Acknowledge and Silence show those buttons.
	Acknowledge, Silence bool
}

// RootBlocks renders the root message of an incident without buttons; see RootBlocksWith.
func RootBlocks(inc incident.Incident, at time.Time) []slack.Block {
	return RootBlocksWith(inc, at, Buttons{})
}

// RootBlocksWith renders the root message of an incident: what is stuck, since when, the evidence, the remedy and
// whether syncmedic will apply it with the exact commands (`syncmedic fix <incident ID>` first), the links (the
// Argo CD UI), and while it is open the buttons b asks for; once resolved, the outcome of the last fix instead.
// Every instant is a Slack date token, so readers see it in their own time zone and no age freezes at the moment of
// posting; at (when the message is rendered) is kept for the signature's callers.
func RootBlocksWith(inc incident.Incident, at time.Time, b Buttons) []slack.Block {
	f := inc.Finding
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(clip(stateEmoji(inc.State)+" "+inc.Title(), 150))),
		slack.NewSectionBlock(md(clip("*"+escape(f.Summary)+"*\n"+objectLine(f), maxSectionText)), nil, nil),
		slack.NewSectionBlock(nil, []*slack.TextBlockObject{
			md("*State*\n" + stateLabel[inc.State]),
			md("*Since*\n" + slackDate(since(inc))),
			md("*Severity*\n" + f.Severity.String()),
			md("*Rule*\n" + ruleLink(f.Rule)),
		}, nil),
	}
	if len(f.Evidence) > 0 {
		blocks = append(blocks, slack.NewSectionBlock(md(clip("*Evidence*\n"+evidenceLines(f.Evidence), maxSectionText)), nil, nil))
	}
	blocks = append(blocks, slack.NewSectionBlock(md(clip(remedyText(inc), maxSectionText)), nil, nil))
	if len(f.Links) > 0 {
		var buttons []slack.BlockElement
		for i, l := range f.Links {
			b := slack.NewButtonBlockElement(fmt.Sprintf("link-%d", i), l.URL, plain(clip(l.Title, 75)))
			b.URL = l.URL
			buttons = append(buttons, b)
		}
		blocks = append(blocks, slack.NewActionBlock("links", buttons...))
	}
	if acts := actionButtons(inc, b); len(acts) > 0 {
		blocks = append(blocks, slack.NewActionBlock(BlockActions, acts...))
	}
	ctx := []slack.MixedElement{md(fmt.Sprintf("incident `%s` · opened %s", inc.ID, slackDate(inc.OpenedAt)))}
	if o := outcomeLine(inc); o != "" {
		ctx = append(ctx, md(o))
	}
	if a := inc.Ack; a != nil && inc.IsOpen() {
		ctx = append(ctx, md(":raising_hand: acknowledged by "+escape(a.By)+" "+slackDate(a.At)))
	}
	if inc.SilencedBy != "" && inc.IsOpen() {
		ctx = append(ctx, md(":zzz: silenced (silence `"+escape(inc.SilencedBy)+"`): not announced again and not fixed automatically while it lasts"))
	}
	for _, a := range f.Advisories {
		ctx = append(ctx, md(":information_source: "+escape(a)))
	}
	blocks = append(blocks, slack.NewContextBlock("", ctx...))
	return blocks
}

// actionButtons are the Fix…, Acknowledge and Silence… buttons of an open incident, as b asks; none once resolved.
func actionButtons(inc incident.Incident, b Buttons) []slack.BlockElement {
	if !inc.IsOpen() || inc.ID == "" {
		return nil
	}
	var out []slack.BlockElement
	if b.Fix && inc.Finding.Remedy.Action != syncmedic.ActionNone {
		fix := slack.NewButtonBlockElement(ActionFix, inc.ID, plain("Fix…"))
		fix.Style = slack.StylePrimary
		out = append(out, fix)
	}
	if b.Acknowledge {
		out = append(out, slack.NewButtonBlockElement(ActionAcknowledge, inc.ID, plain("Acknowledge")))
	}
	if b.Silence {
		out = append(out, slack.NewButtonBlockElement(ActionSilence, inc.ID, plain("Silence…")))
	}
	return out
}

// outcomeLine says how the last applied fix of a resolved incident ended, and who asked for it; "" when none was.
func outcomeLine(inc incident.Incident) string {
	a := inc.LastAttempt()
	if inc.IsOpen() || a == nil || a.Result == incident.ResultDryRun || a.Result == incident.ResultStarted {
		return ""
	}
	s := fmt.Sprintf("last fix: `%s` %s", a.Action, a.Result)
	if a.RequestedBy != "" {
		s += ", requested by " + escape(a.RequestedBy)
	}
	return s
}

func remedyText(inc incident.Incident) string {
	r := inc.Finding.Remedy
	var b strings.Builder
	b.WriteString("*Remedy*")
	if r.Description != "" {
		b.WriteString(": " + escape(r.Description))
	}
	b.WriteString("\n")
	switch {
	case r.Action == syncmedic.ActionNone:
		b.WriteString(":raised_hand: syncmedic will not act: this needs a person.")
	case inc.Auto:
		fmt.Fprintf(&b, ":robot_face: syncmedic will apply `%s` automatically (%s).", r.Action, escape(inc.Plan))
	default:
		fmt.Fprintf(&b, ":no_entry_sign: syncmedic will not apply `%s`: %s.", r.Action, escape(strings.TrimSuffix(inc.Plan, ".")))
	}
	byHand := "To fix it by hand:"
	if r.Action != syncmedic.ActionNone && inc.ID != "" && inc.IsOpen() {
		b.WriteString("\n" + codeBlock("To fix it with syncmedic (without `--yes`, a dry run):", []string{syncmedic.FixCommand(inc.ID) + " --yes"}))
		byHand = "Or by hand:"
	}
	if len(r.Commands) > 0 {
		b.WriteString("\n" + codeBlock(byHand, r.Commands))
	}
	return b.String()
}

// evidenceLines renders each fact as "• `field` = `value`", with "since <date>" when it is known when it became
// true: a Slack date token, not an age, which would be stale as soon as the message is read later.
func evidenceLines(evidence []syncmedic.Evidence) string {
	lines := make([]string, 0, len(evidence))
	for _, e := range evidence {
		l := "• " + inlineCode(e.Field) + " = " + inlineCode(e.Value)
		if e.Since != nil && !e.Since.IsZero() {
			l += ", since " + slackDate(*e.Since)
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// inlineCode renders s as `s`, escaped, with backticks (which would end the span) replaced by quotes.
func inlineCode(s string) string {
	return "`" + escape(strings.ReplaceAll(s, "`", "'")) + "`"
}

// ReplyText renders the thread reply for one transition; EventOpened has none (the root message says it all).
func ReplyText(ev incident.Event) string {
	inc := ev.Incident
	switch ev.Kind {
	case incident.EventUpdated:
		return clip(":memo: The finding changed: "+escape(inc.Finding.Summary)+"\n"+evidenceLines(inc.Finding.Evidence), maxSectionText)
	case incident.EventRemediating:
		return fmt.Sprintf(":hammer_and_wrench: Applying `%s` (%s).", ev.Attempt.Action, escape(ev.Attempt.Reason))
	case incident.EventRemediated:
		return clip(attemptText(ev.Attempt), maxSectionText)
	case incident.EventResolved:
		open := inc.UpdatedAt.Sub(inc.OpenedAt)
		if inc.ResolvedAt != nil {
			open = inc.ResolvedAt.Sub(inc.OpenedAt)
		}
		return fmt.Sprintf(":large_green_circle: Resolved: %s no longer matches (open for %s).", inc.Finding.Rule, syncmedic.HumanDuration(open))
	case incident.EventAcknowledged:
		return ackText(inc.Ack)
	}
	return ""
}

// ackText is the thread reply of an acknowledgement: "Acknowledged by …", or a takeover.
func ackText(a *incident.Ack) string {
	if a == nil {
		return ""
	}
	if a.TakenOverFrom != "" {
		return fmt.Sprintf(":raising_hand: Acknowledged by %s, taking over from %s.", escape(a.By), escape(a.TakenOverFrom))
	}
	return fmt.Sprintf(":raising_hand: Acknowledged by %s.", escape(a.By))
}

func attemptText(a *incident.Attempt) string {
	steps := bullets(a.Steps)
	if a.RequestedBy != "" {
		steps = "\nRequested by " + escape(a.RequestedBy) + "." + steps
	}
	switch a.Result {
	case incident.ResultSucceeded:
		what := "changed"
		if !a.Changed {
			what = "nothing to change: already applied"
		}
		return fmt.Sprintf(":white_check_mark: `%s` succeeded (%s).%s", a.Action, what, steps)
	case incident.ResultFailed:
		next := "syncmedic will try again after its backoff."
		if a.Permanent {
			next = "Retrying cannot fix this: syncmedic will not try again."
		}
		return fmt.Sprintf(":x: `%s` failed: %s\n%s%s", a.Action, escape(a.Error), next, steps)
	case incident.ResultDryRun:
		return fmt.Sprintf(":eyes: Dry-run: syncmedic would apply `%s`, but %s.%s", a.Action, escape(strings.TrimSuffix(a.Reason, ".")), steps)
	}
	return fmt.Sprintf("`%s`: %s", a.Action, a.Result)
}

func bullets(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return "\n• " + strings.Join(escapeAll(lines), "\n• ")
}

func objectLine(f syncmedic.Finding) string {
	s := "`" + f.Object.String() + "`"
	if f.Object.App != "" {
		s += " · app `" + f.Object.App + "`"
		if f.Object.Project != "" {
			s += " (project `" + f.Object.Project + "`)"
		}
	}
	if f.Object.FluxOwner != "" {
		s += " · applied by `" + f.Object.FluxOwner + "`"
	}
	return s
}

func ruleLink(id syncmedic.RuleID) string {
	if r, ok := syncmedic.LookupRule(id); ok {
		return "<" + r.DocsURL() + "|" + string(id) + ">"
	}
	return "`" + string(id) + "`"
}

func since(inc incident.Incident) time.Time {
	if !inc.Finding.Since.IsZero() {
		return inc.Finding.Since
	}
	return inc.OpenedAt
}

// slackDate renders t with Slack's date formatting (each reader sees it in their time zone), UTC as fallback.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format(time.RFC3339))
}

func stateEmoji(s incident.IncidentState) string {
	switch s {
	case incident.StateRemediating:
		return "🟡"
	case incident.StateResolved:
		return "🟢"
	}
	return "🔴"
}

func codeBlock(title string, lines []string) string {
	s := "```\n" + strings.ReplaceAll(strings.Join(lines, "\n"), "```", "'''") + "\n```"
	if title != "" {
		s = title + "\n" + s
	}
	if len(s) > maxSectionText {
		s = s[:maxSectionText-20] + "\n…(cut)\n```"
	}
	return s
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, true, false)
}
func md(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
}

// escape applies Slack's three mrkdwn escapes so object names cannot form links or mentions.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func escapeAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = escape(s)
	}
	return out
}

func clip(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
