package cmp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/syncmedic/syncmedic/argocd/cmp/repofs"
	"github.com/syncmedic/syncmedic/internal/argoapi/synchook"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Result is what Generate did.
type Result struct {
	Source  SourceType
	Docs    []Doc
	Hazards []Hazard
}

// Unfixed returns the hazards no fix removed.
func (r Result) Unfixed() []Hazard {
	var out []Hazard
	for _, h := range r.Hazards {
		if !h.Fixed {
			out = append(out, h)
		}
	}
	return out
}

// StrictError is returned in strict mode when hazards are left; its message lists each one with its fix.
type StrictError struct{ Hazards []Hazard }

func (e *StrictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "strict mode: %d hazard(s) in the rendered manifests (set the plugin parameter strict=false to sync anyway):\n", len(e.Hazards))
	writeHazards(&b, e.Hazards)
	return strings.TrimRight(b.String(), "\n")
}

// Generate renders dir, a directory inside root (reading nothing outside it), lints the objects, applies the fixes p enables, and — unless p.Strict finds hazards left —
// writes the manifests to stdout (unchanged unless a fix or the hazards annotation applies) and the lint report to
// stderr. In strict mode with hazards left it writes nothing and returns a *StrictError.
func Generate(ctx context.Context, root *repofs.Root, dir string, p Params, stdout, stderr io.Writer) (Result, error) {
	r, err := render(ctx, root, dir, p)
	src, docs := r.source, r.docs
	if err != nil {
		return Result{Source: src}, err
	}
	if err := Parse(docs); err != nil {
		return Result{Source: src}, err
	}
	opts := LintOptions{AppNamespace: p.AppNamespace}
	if r.again != nil && hasHookJob(docs) {
		// Run the templates again on the chart and values already read: a hook Job whose pod template differs
		// between two renders of the same input changes on every sync. The first render succeeded, so an error here
		// (the deadline) only skips the check.
		if again, err := r.again(ctx); err == nil && Parse(again) == nil {
			opts.ChangingTemplates = changingTemplates(docs, again)
		}
	}
	res := Result{Source: src, Docs: docs, Hazards: Lint(docs, opts)}
	if err := ApplyFixes(docs, res.Hazards, p); err != nil {
		return res, err
	}
	left := res.Unfixed()
	if p.Strict && len(left) > 0 {
		return res, &StrictError{Hazards: left}
	}
	if p.Annotate {
		if err := Annotate(docs, res.Hazards); err != nil {
			return res, err
		}
	}
	if _, err := stdout.Write(JoinStream(docs)); err != nil {
		return res, err
	}
	return res, WriteReport(stderr, res.Hazards, p)
}

// WriteReport writes the lint results, one hazard per entry with its fix; nothing when there are none.
func WriteReport(w io.Writer, hazards []Hazard, p Params) error {
	if len(hazards) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "syncmedic: %d hazard(s) in the rendered manifests", len(hazards))
	if !p.Annotate {
		fmt.Fprintf(&b, " (set the plugin parameter annotate=true to see them on the objects in Argo CD, strict=true to fail the sync)")
	}
	b.WriteString(":\n")
	writeHazards(&b, hazards)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeHazards(b *strings.Builder, hazards []Hazard) {
	for _, h := range hazards {
		state := ""
		if h.Fixed {
			state = " [fixed by fix=" + string(h.AutoFix) + "]"
		}
		fmt.Fprintf(b, "- %s: %s%s\n  %s\n  fix: %s\n", h.ID, h.Object, state, h.Message, h.Fix)
	}
}

func hasHookJob(docs []Doc) bool {
	for _, d := range docs {
		for _, o := range d.Objects {
			if o.GetKind() == "Job" && hook.IsHook(o) {
				return true
			}
		}
	}
	return false
}

// changingTemplates returns the keys of Jobs whose spec.template differs between two renders.
func changingTemplates(a, b []Doc) map[string]bool {
	templates := func(docs []Doc) map[string]string {
		m := map[string]string{}
		for _, d := range docs {
			for _, o := range d.Objects {
				if o.GetKind() == "Job" {
					tmpl, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "template")
					t, _ := json.Marshal(tmpl)
					m[templateKey(o)] = string(t)
				}
			}
		}
		return m
	}
	ta, tb := templates(a), templates(b)
	out := map[string]bool{}
	for k, v := range ta {
		if w, ok := tb[k]; ok && w != v {
			out[k] = true
		}
	}
	return out
}
