package main

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/syncmedic/syncmedic/bench/internal/benchutil"
	"github.com/syncmedic/syncmedic/ui"
)

// sample is one stuck application's announcement.
type sample struct {
	app string
	// since is the finding's since (the incident API): when the rule says the stuck condition started.
	since time.Time
	// opened is when serve opened the incident; posted when its root chat.postMessage reached Slack.
	opened, posted time.Time
	// outside is since as seen from outside syncmedic: the later of the operation's start, the old hook's
	// deletionTimestamp, and the operation state's last change on a direct watch of the apiserver (syncmedic's own
	// since takes that change when its watch of argocd-server delivers it).
	outside time.Time
}

// announce is the time to announce: from the threshold crossing (since + threshold) to the root message.
func (s sample) announce(th time.Duration) time.Duration { return s.posted.Sub(s.since.Add(th)) }

// detect is the part until the incident opened.
func (s sample) detect(th time.Duration) time.Duration { return s.opened.Sub(s.since.Add(th)) }

// announceOutside is the time to announce counted from the outside view of the crossing.
func (s sample) announceOutside(th time.Duration) time.Duration {
	return s.posted.Sub(s.outside.Add(th))
}

// collect joins the stuck apps with their root messages and incidents; problems lists what is missing or wrong.
func collect(t testing.TB, stuck []stuckApp, roots map[string]post, incidents []ui.Incident, w *opWatch, rule string) ([]sample, []string) {
	t.Helper()
	var out []sample
	var problems []string
	for _, s := range stuck {
		name := s.app.Name
		root, ok := roots[name]
		if !ok {
			problems = append(problems, "no announcement for "+name)
			continue
		}
		if !root.mentions(rule) {
			problems = append(problems, fmt.Sprintf("%s was announced, but not as %s: %.200s", name, rule, root.Text))
			continue
		}
		var inc *ui.Incident
		for i := range incidents {
			if incidents[i].Rule == rule && incidents[i].App != nil && incidents[i].App.Name == name {
				inc = &incidents[i]
				break
			}
		}
		if inc == nil || inc.Since == nil {
			problems = append(problems, "no incident with a since for "+name)
			continue
		}
		smp := sample{app: name, since: *inc.Since, opened: inc.OpenedAt, posted: root.At}
		app := s.app.Get(t)
		if op := app.Status.OperationState; op != nil {
			smp.outside = op.StartedAt.Time
		}
		if d := heldSince(t, s); d.After(smp.outside) {
			smp.outside = d
		}
		if c := w.lastChangeBefore(name, root.At); c.After(smp.outside) {
			smp.outside = c
		}
		out = append(out, smp)
	}
	return out, problems
}

// report is what the tool prints.
type report struct {
	threshold              time.Duration
	samples                []sample
	stuck, healthy         int
	roots, incidents       int
	liveCalls, watchEvents float64
	held, serveCPU         float64
	liveFailed             int
	liveTimedOut           int
	trees                  []time.Duration // the ResourceTree probe's answer times
	treeFails              int             // -1: no probe
	load                   string
	verbose                bool
}

func (r report) print(w io.Writer) {
	th := r.threshold
	pick := func(f func(sample) time.Duration) (p50, p99, lo, hi time.Duration) {
		d := make([]time.Duration, 0, len(r.samples))
		for _, s := range r.samples {
			d = append(d, f(s))
		}
		if len(d) == 0 {
			return
		}
		p50, p99 = benchutil.Percentile(d, 50), benchutil.Percentile(d, 99) // sorts d
		return p50, p99, d[0], d[len(d)-1]
	}
	line := func(what string, f func(sample) time.Duration) {
		p50, p99, lo, hi := pick(f)
		fmt.Fprintf(w, "%s: p50 %s, p99 %s, min %s, max %s\n", what, ms(p50), ms(p99), ms(lo), ms(hi))
	}
	if r.verbose {
		for _, s := range r.samples {
			fmt.Fprintf(w, "  %s: since %s, crossed %s, opened %+s, posted %+s, outside since %s\n", s.app,
				s.since.Format("15:04:05.000"), s.since.Add(th).Format("15:04:05.000"), ms(s.detect(th)), ms(s.announce(th)),
				s.outside.Format("15:04:05.000"))
		}
	}
	fmt.Fprintf(w, "load average (1, 5, 15 min) before → after the stuck applications: %s\n", r.load)
	fmt.Fprintf(w, "argo cd applications held by serve: %.0f (%d healthy, %d stuck)\n", r.held, r.healthy, r.stuck)
	fmt.Fprintf(w, "serve: argo cd live-state calls (ResourceTree, GetResource) %.0f, watch events %.0f, cpu %.1f s\n",
		r.liveCalls, r.watchEvents, r.serveCPU)
	fmt.Fprintf(w, "serve: live-state reads that failed %d (timed out: %d)\n", r.liveFailed, r.liveTimedOut)
	if r.treeFails >= 0 {
		d := append([]time.Duration(nil), r.trees...)
		p50, p99 := benchutil.Percentile(d, 50), benchutil.Percentile(d, 99)
		var hi time.Duration
		if len(d) > 0 {
			hi = d[len(d)-1]
		}
		fmt.Fprintf(w, "argocd-server ResourceTree of a stuck app, probed once a second from outside syncmedic: %d answers, p50 %s, p99 %s, max %s, %d failed\n",
			len(d), ms(p50), ms(p99), ms(hi), r.treeFails)
	}
	fmt.Fprintf(w, "slack: %d root messages, %d incidents; %d of %d stuck applications announced\n", r.roots, r.incidents,
		len(r.samples), r.stuck)
	line("incident opened after the threshold crossing", func(s sample) time.Duration { return s.detect(th) })
	line("announce, from the crossing seen on the apiserver (operation change, hook deletion)", func(s sample) time.Duration { return s.announceOutside(th) })
	line(fmt.Sprintf("time to announce (since + %s → chat.postMessage), %d applications", th, len(r.samples)),
		func(s sample) time.Duration { return s.announce(th) })
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
