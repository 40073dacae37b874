package snapshot

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// decodeYAMLFast decodes a YAML document of the shape kubectl prints — block mappings and sequences of plain or
// quoted scalars, one-line flow collections — into the value yaml.YAMLToJSON then a json.Number decode and
// normalizeNumbers give, without building YAML and JSON trees on the way. ok is false for anything else (block
// scalars, anchors, tags, multi-line scalars, duplicate keys, a root that is not a mapping, …): the caller then
// decodes the document with yaml.YAMLToJSON. A scalar that is not surely a string or a decimal integer is resolved
// by yaml.YAMLToJSON on its own, so its type is the one YAML gives it.
func decodeYAMLFast(doc []byte) (map[string]interface{}, bool) {
	if !printable(doc) {
		return nil, false
	}
	p := fastYAML{}
	for rest := doc; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest)
		}
		l := rest[:i]
		if i < len(rest) {
			rest = rest[i+1:]
		} else {
			rest = nil
		}
		if isBlank(l) {
			continue
		}
		ind := indentOf(l)
		p.lines = append(p.lines, yamlLine{ind: ind, text: l[ind:]})
	}
	if len(p.lines) == 0 || p.lines[0].ind != 0 {
		return nil, false
	}
	m, ok := p.mapping(0)
	if !ok || p.i != len(p.lines) {
		return nil, false
	}
	return m, true
}

// printable reports text of nothing but newlines and the characters YAML allows (no tab, no carriage return, no
// byte order mark, and none of the line breaks YAML 1.1 adds to '\n': NEL, LS and PS, which end or fold a line in
// go-yaml; those are left to yaml.YAMLToJSON).
func printable(doc []byte) bool {
	for i := 0; i < len(doc); {
		c := doc[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n') || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(doc[i:])
		if r == utf8.RuneError || r == 0xFEFF || r == 0x2028 || r == 0x2029 || !(r >= 0xA0 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000) {
			return false
		}
		i += n
	}
	return true
}

type yamlLine struct {
	ind  int
	text []byte
}

type fastYAML struct {
	lines []yamlLine
	i     int
	depth int // collections open, block and flow
}

// maxFastDepth is how deep the fast path nests collections. YAML's scanner refuses more than 10,000 levels and
// encoding/json more than 10,000 (the root mapping counts), so a document nested deeper than this, which no
// Kubernetes object is, is left to yaml.YAMLToJSON to accept or refuse.
const maxFastDepth = 1000

// mapping reads a block mapping whose keys are at column ind.
func (p *fastYAML) mapping(ind int) (map[string]interface{}, bool) {
	if p.depth++; p.depth > maxFastDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	m := map[string]interface{}{}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.ind < ind {
			break
		}
		if l.ind > ind {
			return nil, false
		}
		key, rest, isKey := splitKey(l.text)
		if !isKey {
			return nil, false
		}
		if _, dup := m[key]; dup {
			return nil, false
		}
		p.i++
		v, ok := p.value(ind, rest)
		if !ok {
			return nil, false
		}
		m[key] = v
	}
	return m, true
}

// value reads the value of a key at column ind, rest being what follows "key:" on its line.
func (p *fastYAML) value(ind int, rest []byte) (interface{}, bool) {
	rest = bytes.TrimLeft(rest, " ")
	if len(rest) == 0 {
		if p.i >= len(p.lines) {
			return nil, true
		}
		next := p.lines[p.i]
		switch {
		case next.ind > ind && isDash(next.text):
			return p.sequence(next.ind)
		case next.ind > ind:
			return p.mapping(next.ind)
		case next.ind == ind && isDash(next.text):
			return p.sequence(ind)
		}
		return nil, true
	}
	v, ok := inlineValue(rest, p.depth)
	if !ok || (p.i < len(p.lines) && p.lines[p.i].ind > ind) {
		return nil, false // a scalar continued on the next line
	}
	return v, true
}

func isDash(t []byte) bool { return len(t) > 0 && t[0] == '-' && (len(t) == 1 || t[1] == ' ') }

// sequence reads a block sequence whose dashes are at column ind.
func (p *fastYAML) sequence(ind int) ([]interface{}, bool) {
	if p.depth++; p.depth > maxFastDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	out := []interface{}{}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.ind < ind || (l.ind == ind && !isDash(l.text)) {
			break
		}
		if l.ind > ind || len(l.text) < 3 {
			return nil, false
		}
		sp := 1 + indentOf(l.text[1:])
		content := l.text[sp:]
		if isDash(content) {
			return nil, false // a sequence in a sequence
		}
		if _, _, isKey := splitKey(content); isKey {
			p.lines[p.i] = yamlLine{ind: ind + sp, text: content}
			m, ok := p.mapping(ind + sp)
			if !ok {
				return nil, false
			}
			out = append(out, m)
			continue
		}
		p.i++
		v, ok := inlineValue(content, p.depth)
		if !ok || (p.i < len(p.lines) && p.lines[p.i].ind > ind) {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// maxSimpleKey is how far, in bytes, a key's ':' may be from the key's start. YAML's scanner gives up on an
// implicit key whose ':' is more than 1024 characters after its start ("could not find expected ':'", or "mapping
// values are not allowed"); a byte is at most a character, so a key within 1024 bytes is surely within the limit,
// and a longer one is left to yaml.YAMLToJSON.
const maxSimpleKey = 1024

// splitKey splits "key: rest" or "key:"; isKey is false when t is not such a line, or its key is not surely the
// string it reads.
func splitKey(t []byte) (key string, rest []byte, isKey bool) {
	if len(t) > 0 && (t[0] == '"' || t[0] == '\'') {
		s, n, ok := quoted(t, 0)
		if !ok || n >= len(t) || t[n] != ':' || (n+1 < len(t) && t[n+1] != ' ') || n > maxSimpleKey {
			return "", nil, false
		}
		return s, t[n+1:], true
	}
	i := bytes.Index(t, []byte(": "))
	if i < 0 {
		if len(t) == 0 || t[len(t)-1] != ':' {
			return "", nil, false
		}
		i = len(t) - 1
	}
	k := t[:i]
	if !plainString(k) || i > maxSimpleKey {
		return "", nil, false
	}
	return string(k), t[i+1:], true
}

// inlineValue reads a value written on one line: a flow collection, a quoted or a plain scalar, with nothing after it;
// depth collections are open around it.
func inlineValue(t []byte, depth int) (interface{}, bool) {
	t = bytes.TrimRight(t, " ")
	if len(t) == 0 {
		return nil, false
	}
	switch t[0] {
	case '{', '[':
		v, n, ok := flowValue(t, 0, depth)
		return v, ok && n == len(t)
	case '"', '\'':
		s, n, ok := quoted(t, 0)
		if !ok {
			return resolveAlone(t)
		}
		return s, n == len(t)
	}
	if bytes.Contains(t, []byte(" #")) || bytes.Contains(t, []byte(": ")) {
		return nil, false
	}
	return plainScalar(t)
}

// flowValue reads a flow value starting at t[i], depth collections being open around it, and returns the index
// after it.
func flowValue(t []byte, i, depth int) (interface{}, int, bool) {
	i = skipSpaces(t, i)
	if i >= len(t) {
		return nil, i, false
	}
	if (t[i] == '{' || t[i] == '[') && depth+1 > maxFastDepth {
		return nil, i, false
	}
	switch t[i] {
	case '{':
		m := map[string]interface{}{}
		i = skipSpaces(t, i+1)
		for i < len(t) && t[i] != '}' {
			var key string
			start := i
			if t[i] == '"' || t[i] == '\'' {
				s, n, ok := quoted(t, i)
				if !ok {
					return nil, i, false
				}
				key, i = s, n
			} else {
				j := i
				for j < len(t) && t[j] != ':' && !isFlowIndicator(t[j]) {
					j++
				}
				k := bytes.TrimRight(t[i:j], " ")
				if !plainString(k) || !flowPlain(k) {
					return nil, i, false
				}
				key, i = string(k), j
			}
			if i+1 >= len(t) || t[i] != ':' || t[i+1] != ' ' || i-start > maxSimpleKey {
				return nil, i, false
			}
			if _, dup := m[key]; dup {
				return nil, i, false
			}
			v, n, ok := flowValue(t, i+1, depth+1)
			if !ok {
				return nil, i, false
			}
			m[key] = v
			i = skipSpaces(t, n)
			if i < len(t) && t[i] == ',' {
				i = skipSpaces(t, i+1)
				if i < len(t) && t[i] == '}' {
					return nil, i, false
				}
			} else if i >= len(t) || t[i] != '}' {
				return nil, i, false
			}
		}
		if i >= len(t) {
			return nil, i, false
		}
		return m, i + 1, true
	case '[':
		out := []interface{}{}
		i = skipSpaces(t, i+1)
		for i < len(t) && t[i] != ']' {
			v, n, ok := flowValue(t, i, depth+1)
			if !ok {
				return nil, i, false
			}
			out = append(out, v)
			i = skipSpaces(t, n)
			if i < len(t) && t[i] == ',' {
				i = skipSpaces(t, i+1)
				if i < len(t) && t[i] == ']' {
					return nil, i, false
				}
			} else if i >= len(t) || t[i] != ']' {
				return nil, i, false
			}
		}
		if i >= len(t) {
			return nil, i, false
		}
		return out, i + 1, true
	case '"', '\'':
		s, n, ok := quoted(t, i)
		return s, n, ok
	}
	j := i
	for j < len(t) && !isFlowIndicator(t[j]) && t[j] != ':' && t[j] != '#' {
		j++
	}
	if j < len(t) && (t[j] == ':' || t[j] == '#') {
		return nil, j, false
	}
	s := bytes.TrimRight(t[i:j], " ")
	if len(s) == 0 || !(flowPlain(s) || string(s) == "~") {
		return nil, j, false
	}
	v, ok := plainScalar(s)
	return v, j, ok
}

// flowPlain reports a plain scalar in a flow collection made only of the characters of names, labels, numbers
// and versions (YAML's rules for the others in flow context are subtle).
func flowPlain(s []byte) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '+' || c == '.' || c == '_' || c == '/') {
			return false
		}
	}
	return true
}

func isFlowIndicator(c byte) bool { return c == ',' || c == '[' || c == ']' || c == '{' || c == '}' }

func skipSpaces(t []byte, i int) int {
	for i < len(t) && t[i] == ' ' {
		i++
	}
	return i
}

// quoted reads a quoted scalar that ends on its line: single-quoted (” is a quote), or double-quoted without
// escapes (a backslash makes ok false).
func quoted(t []byte, i int) (string, int, bool) {
	q := t[i]
	var buf []byte // set once a '' is met
	for j := i + 1; j < len(t); j++ {
		switch {
		case q == '"' && t[j] == '\\':
			return "", j, false
		case q == '\'' && t[j] == q && j+1 < len(t) && t[j+1] == q:
			if buf == nil {
				buf = append([]byte{}, t[i+1:j]...)
			}
			buf = append(buf, q)
			j++
		case t[j] == q:
			if buf != nil {
				return string(buf), j + 1, true
			}
			return string(t[i+1 : j]), j + 1, true
		case buf != nil:
			buf = append(buf, t[j])
		}
	}
	return "", len(t), false
}

// plainString reports a plain scalar YAML surely reads as this very string: it starts with a letter, '/' or '_'
// (not an indicator, digit, sign or dot), is not one of YAML 1.1's booleans or nulls, and has no ": " or " #".
func plainString(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	c := s[0]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '/' || c == '_') {
		return false
	}
	if bytes.Contains(s, []byte(": ")) || bytes.Contains(s, []byte(" #")) || s[len(s)-1] == ' ' || s[len(s)-1] == ':' {
		return false
	}
	switch string(s) {
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
		"null", "Null", "NULL":
		return false
	}
	return true
}

// plainScalar resolves a plain scalar: a sure string, a decimal integer, true/false, null, or else, when it starts
// like a number, what YAML makes of it alone.
func plainScalar(s []byte) (interface{}, bool) {
	if plainString(s) {
		return string(s), true
	}
	switch string(s) { // YAML 1.1's words, as go.yaml.in/yaml/v2 resolves them
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return true, true
	case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return false, true
	case "null", "Null", "NULL", "~":
		return nil, true
	}
	if decimal(s) {
		if n, err := strconv.ParseInt(string(s), 10, 64); err == nil {
			return n, true
		}
	}
	if c := s[0]; !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.') {
		return nil, false // an indicator: a tag, an anchor, an alias, a block scalar…
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '+' || c == '.' || c == ':' || c == '_') {
			return nil, false
		}
	}
	return resolveAlone(s) // a number, a timestamp, or a string that starts like one
}

// decimal reports -?(0|[1-9][0-9]*).
func decimal(s []byte) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// resolveAlone decodes one scalar as the whole document path would: yaml.YAMLToJSON, a json.Number decode and
// normalizeNumbers.
func resolveAlone(s []byte) (interface{}, bool) {
	doc := append([]byte("v: "), s...)
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, false
	}
	var m map[string]interface{}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || len(m) != 1 {
		return nil, false
	}
	v, ok := m["v"]
	if !ok {
		return nil, false
	}
	return normalizeNumbers(v), true
}
