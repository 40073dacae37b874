package snapshot

import (
	"bytes"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// typeMeta is what the text of an object says of its kind. sure is false unless the text surely decodes to an
// object with that apiVersion and kind, a metadata object and no items (a List is decoded, whatever its kind).
type typeMeta struct {
	gk   schema.GroupKind
	sure bool
}

func newTypeMeta(apiVersion, kind string, metadata, items, unsure bool) typeMeta {
	if unsure || !metadata || items || apiVersion == "" || kind == "" {
		return typeMeta{}
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return typeMeta{} // addObject counts it under an empty kind; leave that to it
	}
	return typeMeta{gk: schema.GroupKind{Group: gv.Group, Kind: kind}, sure: true}
}

// sniffJSON reads the top-level keys of a valid JSON object (as json.Decoder returned it).
func sniffJSON(raw []byte) typeMeta {
	var apiVersion, kind string
	var metadata, items, unsure bool
	i := skipJSONSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return typeMeta{}
	}
	i++
	for {
		i = skipJSONSpace(raw, i)
		if i >= len(raw) || raw[i] == '}' {
			break
		}
		if raw[i] == ',' {
			i++
			continue
		}
		key, next, plain := jsonBytes(raw, i)
		if !plain {
			return typeMeta{}
		}
		i = skipJSONSpace(raw, next)
		if i >= len(raw) || raw[i] != ':' {
			return typeMeta{}
		}
		i = skipJSONSpace(raw, i+1)
		if i >= len(raw) {
			return typeMeta{}
		}
		start := i
		i = skipJSONValue(raw, i)
		switch string(key) {
		case "apiVersion", "kind":
			b, _, ok := jsonBytes(raw, start)
			v := string(b)
			if !ok {
				v, unsure = "", true
			}
			if string(key) == "kind" {
				kind = v
			} else {
				apiVersion = v
			}
		case "metadata":
			metadata = raw[start] == '{'
		case "items":
			items = true
		}
	}
	return newTypeMeta(apiVersion, kind, metadata, items, unsure)
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// jsonBytes returns the string starting at b[i] and the index after it; plain is false when it is not a string, or
// has escapes or bytes outside printable ASCII (encoding/json turns invalid UTF-8 into U+FFFD, so only the decoder
// can say what such a string reads as).
func jsonBytes(b []byte, i int) (s []byte, next int, plain bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		if b[j] < 0x20 || b[j] >= 0x80 {
			return nil, j, false
		}
		switch b[j] {
		case '\\':
			return nil, j, false
		case '"':
			return b[i+1 : j], j + 1, true
		}
	}
	return nil, len(b), false
}

// skipJSONValue returns the index after the valid JSON value starting at b[i].
func skipJSONValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// sniffYAML reads the keys at column 0 of a YAML document: sure only when each is a plain `key:` or `key: value`
// line and apiVersion, kind and metadata are written so that they surely decode to two strings and a mapping.
func sniffYAML(doc []byte) typeMeta {
	var apiVersion, kind string
	var metadata, items, unsure bool
	var seen [4]bool
	for rest := doc; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest) - 1
		}
		l := rest[:i+1]
		rest = rest[i+1:]
		if isBlank(l) || l[0] == ' ' {
			continue
		}
		if bytes.ContainsAny(l, "\t&*!|>") || bytes.Contains(l, []byte("<<")) {
			return typeMeta{}
		}
		c := bytes.IndexByte(l, ':')
		if c <= 0 || !plainKey(l[:c]) {
			return typeMeta{}
		}
		val := bytes.TrimSpace(l[c+1:])
		k := -1
		switch string(l[:c]) {
		case "apiVersion":
			k = 0
			apiVersion, unsure = yamlWord(val, isAPIVersion, unsure || continued(rest))
		case "kind":
			k = 1
			kind, unsure = yamlWord(val, isKind, unsure || continued(rest))
		case "metadata":
			k = 2
			switch {
			case len(val) > 0 && val[0] == '{':
				metadata = true
			case len(val) == 0:
				metadata = blockMapping(rest)
			}
		case "items":
			k = 3
			items = true
		}
		if k >= 0 {
			if seen[k] {
				return typeMeta{}
			}
			seen[k] = true
		}
	}
	return newTypeMeta(apiVersion, kind, metadata, items, unsure)
}

// continued reports whether the next line that is not blank is indented: the continuation of a plain scalar when
// it follows `key: value`.
func continued(rest []byte) bool {
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest) - 1
		}
		l := rest[:i+1]
		rest = rest[i+1:]
		if !isBlank(l) {
			return l[0] == ' '
		}
	}
	return false
}

func plainKey(k []byte) bool {
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// yamlWord returns a scalar that is surely the string it reads (plain or quoted, checked by ok).
func yamlWord(val []byte, ok func(string) bool, unsure bool) (string, bool) {
	if len(val) >= 2 && (val[0] == '"' && val[len(val)-1] == '"' || val[0] == '\'' && val[len(val)-1] == '\'') {
		val = val[1 : len(val)-1]
	}
	if !ok(string(val)) {
		return "", true
	}
	return string(val), unsure
}

// isKind reports a CamelCase word that YAML reads as a string (not a boolean such as Yes, On or No).
func isKind(s string) bool {
	if len(s) == 0 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null":
		return false
	}
	return true
}

// isAPIVersion reports "v1", "group/v1beta2" and the like: never a number, boolean or null in YAML.
func isAPIVersion(s string) bool {
	v := s
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		g := s[:i]
		if g == "" {
			return false
		}
		for _, c := range []byte(g) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
				return false
			}
		}
		v = s[i+1:]
	}
	if len(v) < 2 || v[0] != 'v' {
		return false
	}
	for _, c := range []byte(v[1:]) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// blockMapping reports whether the lines after `key:` start an indented block mapping (`  name: x`).
func blockMapping(rest []byte) bool {
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest) - 1
		}
		l := rest[:i+1]
		rest = rest[i+1:]
		if isBlank(l) {
			continue
		}
		ind := indentOf(l)
		if ind == 0 {
			return false
		}
		t := bytes.TrimSpace(l[ind:])
		c := bytes.IndexByte(t, ':')
		return c > 0 && plainKeyOrDotted(t[:c]) && (c == len(t)-1 || t[c+1] == ' ')
	}
	return false
}

// plainKeyOrDotted accepts the keys metadata holds (name, labels, …).
func plainKeyOrDotted(k []byte) bool {
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '/') {
			return false
		}
	}
	return true
}
