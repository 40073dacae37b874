package cmp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Doc is one document of a rendered YAML stream, its bytes exactly as rendered: a leading "---" line and comments
// included, so that the concatenation of a stream's documents is the stream.
type Doc struct {
	// Raw is the document's bytes.
	Raw []byte
	// Source is the file (plain directory) or template (Helm "# Source:" comment) the document came from, if known.
	Source string
	// Objects are the Kubernetes objects the document holds: none for an empty document, one, or the items of a
	// List. Set by Parse.
	Objects []*unstructured.Unstructured
	// changed is set when a fix or an annotation rewrote Raw.
	changed bool
}

// SplitStream splits a YAML stream into documents at lines starting with "---". It never loses or adds a byte:
// joining the Raw of the result gives b back.
func SplitStream(b []byte) []Doc {
	var docs []Doc
	start := 0
	for off := 0; off < len(b); {
		end := bytes.IndexByte(b[off:], '\n')
		next := len(b)
		if end >= 0 {
			next = off + end + 1
		}
		if off > start && isSeparator(b[off:next]) {
			docs = append(docs, Doc{Raw: b[start:off]})
			start = off
		}
		off = next
	}
	if start < len(b) {
		docs = append(docs, Doc{Raw: b[start:]})
	}
	for i := range docs {
		docs[i].Source = sourceComment(docs[i].Raw)
	}
	return docs
}

// JoinStream concatenates the documents' bytes.
func JoinStream(docs []Doc) []byte {
	var buf bytes.Buffer
	for _, d := range docs {
		buf.Write(d.Raw)
	}
	return buf.Bytes()
}

// isSeparator reports whether line is a YAML document separator: "---" alone or followed by a blank.
func isSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	return len(line) == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\n' || line[3] == '\r'
}

// sourceComment returns the path of a Helm "# Source: path" comment at the head of a document.
func sourceComment(raw []byte) string {
	for _, line := range strings.SplitN(string(raw), "\n", 4) {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), "# Source: "); ok {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// Parse decodes the documents' objects. A document that is not valid YAML is an error naming its source and
// position: Argo CD would fail on it too, with a less helpful message.
func Parse(docs []Doc) error {
	for i := range docs {
		objs, err := parseDoc(docs[i].Raw)
		if err != nil {
			where := fmt.Sprintf("document %d", i+1)
			if docs[i].Source != "" {
				where += " (" + docs[i].Source + ")"
			}
			return fmt.Errorf("%s: %w", where, err)
		}
		docs[i].Objects = objs
	}
	return nil
}

func parseDoc(raw []byte) ([]*unstructured.Unstructured, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, err
	}
	var head struct {
		Kind *string `json:"kind"`
	}
	if t := bytes.TrimSpace(js); bytes.Equal(t, []byte("null")) || bytes.Equal(t, []byte("{}")) {
		return nil, nil
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if head.Kind == nil || *head.Kind == "" {
		return nil, fmt.Errorf("object has no kind")
	}
	// The unstructured JSON decoder keeps integers as int64, as the apiserver's own decoding does.
	obj, _, err := unstructured.UnstructuredJSONScheme.Decode(js, nil, nil)
	if err != nil {
		return nil, err
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return []*unstructured.Unstructured{o}, nil
	case *unstructured.UnstructuredList:
		out := make([]*unstructured.Unstructured, 0, len(o.Items))
		for i := range o.Items {
			out = append(out, &o.Items[i])
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected object %T", obj)
}
