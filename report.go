package syncmedic

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Report is what `syncmedic scan` prints in json and yaml: when it was judged, the findings, and the input
// problems met on the way.
type Report struct {
	GeneratedAt time.Time `json:"generatedAt"`
	Findings    []Finding `json:"findings"`
	// Problems are input the scan could not use (a malformed file, an unreachable source), one line each.
	Problems []string `json:"problems,omitempty"`
	// Read says what each source read ("snapshot dump/: 12 objects: 5 Application, 4 Job"), so an all-clear says
	// what it covers.
	Read []string `json:"read,omitempty"`
	// OldDump, when set, says the dump is more than a day older than GeneratedAt (see NewOldDump).
	OldDump *OldDump `json:"oldDump,omitempty"`
}

// WriteTable prints findings the way kubectl prints resources: RULE, OBJECT, AGE, SUMMARY, then one line per
// problem. An empty list prints a one-line all-clear.
func WriteTable(w io.Writer, r Report) error { return writeTable(w, r, false) }

// WriteWideTable is WriteTable with the columns of `-o wide`: the Argo CD app and project in columns of their own
// (OBJECT then names the object alone), and the evidence on the finding's line.
func WriteWideTable(w io.Writer, r Report) error { return writeTable(w, r, true) }

func writeTable(w io.Writer, r Report, wide bool) error {
	if len(r.Findings) == 0 {
		if _, err := fmt.Fprintln(w, "No stuck syncs found."); err != nil {
			return err
		}
		if err := writeRead(w, r.Read); err != nil {
			return err
		}
		if err := writeOldDump(w, r.OldDump); err != nil {
			return err
		}
		return writeProblems(w, r.Problems)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "RULE\tOBJECT\tAPP\tPROJECT\tAGE\tSUMMARY\tEVIDENCE")
	} else {
		fmt.Fprintln(tw, "RULE\tOBJECT\tAGE\tSUMMARY")
	}
	for _, f := range r.Findings {
		age := "-"
		if d := f.Age(r.GeneratedAt); d > 0 {
			age = HumanDuration(d)
		}
		if wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Rule, objectName(f.Object), orDash(f.Object.App), orDash(f.Object.Project), age, oneLine(f.Summary), evidenceColumn(f.Evidence, r.GeneratedAt))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Rule, objectColumn(f.Object), age, oneLine(f.Summary))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "\n%d stuck. For the evidence and the exact fix of each: -o yaml (or `syncmedic scan ... -o yaml --rule RULE`).\n", len(r.Findings)); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w, "To apply an automatic remedy: `syncmedic fix ID` (a dry run unless --yes); -o yaml gives each finding's `fix:` command."); err != nil {
		return err
	}
	if err := writeRead(w, r.Read); err != nil {
		return err
	}
	if err := writeOldDump(w, r.OldDump); err != nil {
		return err
	}
	return writeProblems(w, r.Problems)
}

func writeRead(w io.Writer, read []string) error {
	for _, r := range read {
		if _, err := fmt.Fprintln(w, "Read "+r+"."); err != nil {
			return err
		}
	}
	return nil
}

func writeProblems(w io.Writer, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\n%d input problem(s), skipped:\n", len(problems)); err != nil {
		return err
	}
	for _, p := range problems {
		if _, err := fmt.Fprintln(w, "  "+p); err != nil {
			return err
		}
	}
	return nil
}

// objectColumn names the object as kind/namespace/name, with the Argo CD app when it is not the object itself.
func objectColumn(o ObjectRef) string {
	s := objectName(o)
	if o.App != "" && !(o.Kind == "Application" && o.Name == o.App) {
		s += " (app " + o.App + ")"
	}
	return s
}

// objectName names the object as kind/namespace/name.
func objectName(o ObjectRef) string {
	if o.Namespace != "" {
		return o.Kind + "/" + o.Namespace + "/" + o.Name
	}
	return o.Kind + "/" + o.Name
}

// evidenceColumn is a finding's evidence on one line: "field = value (age ago); …".
func evidenceColumn(ev []Evidence, now time.Time) string {
	parts := make([]string, 0, len(ev))
	for _, e := range ev {
		parts = append(parts, oneLine(e.Format(now)))
	}
	return orDash(strings.Join(parts, "; "))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// FixCommand returns the command that applies the automatic remedy of the finding or incident with id (a
// fingerprint, or an incident ID such as Slack shows): `syncmedic fix ID`.
func FixCommand(id string) string { return "syncmedic fix " + id }

// printedReport is the json and yaml form of a Report: each finding with its `fix` command.
type printedReport struct {
	GeneratedAt time.Time        `json:"generatedAt"`
	Findings    []printedFinding `json:"findings"`
	Problems    []string         `json:"problems,omitempty"`
	Read        []string         `json:"read,omitempty"`
	OldDump     *OldDump         `json:"oldDump,omitempty"`
}

// printedFinding is a Finding with the command that fixes it, set only when it has an automatic remedy (`fix`
// exits 2 for a finding that only notifies: its remedy's commands are the manual steps).
type printedFinding struct {
	Finding
	Fix string `json:"fix,omitempty"`
}

func printed(r Report) printedReport {
	p := printedReport{GeneratedAt: r.GeneratedAt, Findings: make([]printedFinding, 0, len(r.Findings)), Problems: r.Problems, Read: r.Read, OldDump: r.OldDump}
	for _, f := range r.Findings {
		pf := printedFinding{Finding: f}
		if f.Remedy.Action != ActionNone && f.Fingerprint != "" {
			pf.Fix = FixCommand(f.Fingerprint)
		}
		p.Findings = append(p.Findings, pf)
	}
	return p
}

// WriteJSON prints the report as indented JSON, each finding with its `fix` command.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(printed(r))
}

// WriteYAML prints the report as YAML (the JSON field names), each finding with its `fix` command.
func WriteYAML(w io.Writer, r Report) error {
	b, err := yaml.Marshal(printed(r))
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// WriteReport prints r in format ("table", "wide", "json" or "yaml").
func WriteReport(w io.Writer, format string, r Report) error {
	switch format {
	case "table", "":
		return WriteTable(w, r)
	case "wide":
		return WriteWideTable(w, r)
	case "json":
		return WriteJSON(w, r)
	case "yaml":
		return WriteYAML(w, r)
	}
	return fmt.Errorf("unknown output format %q: want table, wide, json or yaml", format)
}
