package cmp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// ApplyFixes applies the opt-in fixes p enables to the documents holding their hazards and marks those hazards
// Fixed. Only the documents a fix changes are rewritten; the others keep their bytes.
func ApplyFixes(docs []Doc, hazards []Hazard, p Params) error {
	for i := range hazards {
		h := &hazards[i]
		if h.AutoFix == "" || !p.Enabled(h.AutoFix) {
			continue
		}
		var edit kyaml.Filter
		switch h.AutoFix {
		case FixDeletePolicy:
			edit = kyaml.SetAnnotation(synccommon.AnnotationKeyHookDeletePolicy, string(synccommon.HookDeletePolicyBeforeHookCreation))
		case FixKnativeOwnership:
			edit = kyaml.FilterFunc(addKnativeOwnershipEnv)
		default:
			continue
		}
		ok, err := editDoc(&docs[h.doc], edit)
		if err != nil {
			return fmt.Errorf("fix %s on %s: %w", h.AutoFix, h.Object, err)
		}
		h.Fixed = ok
	}
	return nil
}

// Annotate writes HazardsAnnotation on every object that still has hazards, naming them.
func Annotate(docs []Doc, hazards []Hazard) error {
	byDoc := map[int][]string{}
	for _, h := range hazards {
		if !h.Fixed && !containsString(byDoc[h.doc], string(h.ID)) {
			byDoc[h.doc] = append(byDoc[h.doc], string(h.ID))
		}
	}
	idx := make([]int, 0, len(byDoc))
	for i := range byDoc {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		if _, err := editDoc(&docs[i], kyaml.SetAnnotation(HazardsAnnotation, strings.Join(byDoc[i], ","))); err != nil {
			return fmt.Errorf("annotate document %d: %w", i+1, err)
		}
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// editDoc applies f to a document holding exactly one object (a List is left alone) and re-parses it. It keeps
// the document's leading separator and comments byte for byte, and writes JSON back for a JSON document.
func editDoc(d *Doc, f kyaml.Filter) (bool, error) {
	if len(d.Objects) != 1 || d.Objects[0].IsList() {
		return false, nil
	}
	prefix, body := splitPrefix(d.Raw)
	node, err := kyaml.Parse(string(body))
	if err != nil {
		return false, err
	}
	if _, err := node.Pipe(f); err != nil {
		return false, err
	}
	var out []byte
	if startsWithJSON(body) {
		js, err := node.MarshalJSON()
		if err != nil {
			return false, err
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, js, "", "  "); err != nil {
			return false, err
		}
		out = append(buf.Bytes(), '\n')
	} else {
		style := kyaml.SequenceIndentStyle(kyaml.DeriveSeqIndentStyle(string(body)))
		if out, err = kyaml.MarshalWithOptions(node.Document(), &kyaml.EncoderOptions{SeqIndent: style}); err != nil {
			return false, err
		}
	}
	raw := append(append([]byte{}, prefix...), out...)
	objs, err := parseDoc(raw)
	if err != nil {
		return false, err
	}
	d.Raw, d.Objects, d.changed = raw, objs, true
	return true, nil
}

// splitPrefix separates a document's leading separator, comment and blank lines from its body.
func splitPrefix(raw []byte) (prefix, body []byte) {
	off := 0
	for off < len(raw) {
		end := bytes.IndexByte(raw[off:], '\n')
		if end < 0 {
			break
		}
		line := bytes.TrimSpace(raw[off : off+end])
		if len(line) != 0 && line[0] != '#' && !isSeparator(raw[off:off+end+1]) {
			break
		}
		off += end + 1
	}
	return raw[:off], raw[off:]
}

// addKnativeOwnershipEnv adds WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP=true to the Knative webhook container, or sets
// it to "true" where it is present with another value.
func addKnativeOwnershipEnv(rn *kyaml.RNode) (*kyaml.RNode, error) {
	containers, err := rn.Pipe(kyaml.Lookup("spec", "template", "spec", "containers"))
	if err != nil || containers == nil {
		return rn, err
	}
	elems, err := containers.Elements()
	if err != nil {
		return rn, err
	}
	for _, c := range elems {
		image := c.Field("image")
		if image == nil || !strings.Contains(image.Value.YNode().Value, "knative.dev/") ||
			!strings.Contains(image.Value.YNode().Value, "/cmd/webhook") {
			continue
		}
		env, err := c.Pipe(kyaml.LookupCreate(kyaml.SequenceNode, "env"))
		if err != nil {
			return rn, err
		}
		value := kyaml.NewStringRNode("true")
		value.YNode().Style = kyaml.DoubleQuotedStyle // an env value is a string; a bare true is a YAML boolean
		if existing, _ := env.Pipe(kyaml.MatchElement("name", KnativeOwnershipEnv)); existing != nil {
			return rn, existing.PipeE(kyaml.SetField("value", value))
		}
		entry := kyaml.NewMapRNode(nil)
		if err := entry.PipeE(kyaml.SetField("name", kyaml.NewStringRNode(KnativeOwnershipEnv))); err != nil {
			return rn, err
		}
		if err := entry.PipeE(kyaml.SetField("value", value)); err != nil {
			return rn, err
		}
		return rn, env.PipeE(kyaml.Append(entry.YNode()))
	}
	return rn, nil
}
