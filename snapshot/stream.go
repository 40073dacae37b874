package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// addStream reads one file's content from r without holding it whole: a List (YAML or JSON) is read one item at a
// time; with KeepUsedOnly, an item of a kind no rule uses is counted from its text without being decoded (mayKeep),
// and the others are decoded one by one and kept when a rule reads them (keep). It returns false, having added nothing, for content it
// does not take on (a malformed file, a problem to report inside a List, YAML anchors across items, a JSON object
// that is not a List): addAll reads that file whole and gives the same results the stream would, plus the problems.
func (s *Snapshot) addStream(name string, r io.Reader) bool {
	br := bufio.NewReaderSize(r, 64<<10)
	skip, first, ok := leadingSpace(br)
	if !ok {
		return false
	}
	b := &Snapshot{KeepUsedOnly: s.KeepUsedOnly}
	b.init()
	switch first {
	case 0: // nothing but white space
		return true
	case '{', '[':
		if _, err := br.Discard(skip); err != nil || !b.jsonStream(name, br) {
			return false
		}
	default:
		if !b.yamlStream(name, br) {
			return false
		}
	}
	s.merge(b)
	return true
}

// leadingSpace peeks past the white space and byte order marks addAll trims, returning their length and the byte
// after them (0 at the end of the input); ok is false when they fill the whole buffer.
func leadingSpace(br *bufio.Reader) (n int, first byte, ok bool) {
	head, err := br.Peek(br.Size())
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return 0, 0, false
	}
	for n < len(head) {
		switch {
		case head[n] == ' ' || head[n] == '\t' || head[n] == '\r' || head[n] == '\n':
			n++
		case bytes.HasPrefix(head[n:], []byte("\ufeff")):
			n += 3
		default:
			return n, head[n], true
		}
	}
	return n, 0, len(head) < br.Size()
}

// jsonStream reads a JSON array of objects, or a List object, item by item. Any problem makes it give up.
func (s *Snapshot) jsonStream(name string, r io.Reader) bool {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	var raw json.RawMessage // reused: Decode appends into it
	items := func() bool {
		for dec.More() {
			if err := dec.Decode(&raw); err != nil || !s.jsonItem(name, raw) {
				return false
			}
		}
		end, err := dec.Token()
		return err == nil && end == json.Delim(']')
	}
	switch tok {
	case json.Delim('['):
		if !items() {
			return false
		}
	case json.Delim('{'):
		kind, sawItems := "", false
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return false
			}
			switch key {
			case "items":
				if sawItems {
					return false
				}
				sawItems = true
				if t, err := dec.Token(); err != nil || t != json.Delim('[') || !items() {
					return false
				}
			case "kind":
				var v interface{}
				if err := dec.Decode(&v); err != nil {
					return false
				}
				kind, _ = v.(string)
			default:
				if err := dec.Decode(&raw); err != nil {
					return false
				}
			}
		}
		if end, err := dec.Token(); err != nil || end != json.Delim('}') {
			return false
		}
		if !sawItems || !(strings.HasSuffix(kind, "List") || kind == "") {
			return false // an object, not a List: addAll decodes it
		}
	default:
		return false
	}
	return len(s.Problems) == 0
}

// jsonItem adds one element of a JSON array: counted from its text when it is an object no rule reads, else decoded.
func (s *Snapshot) jsonItem(name string, raw []byte) bool {
	if s.KeepUsedOnly {
		if t := sniffJSON(raw); t.sure && !mayKeep(t.gk, raw) {
			s.count(t.gk)
			return true
		}
	}
	var v interface{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return false
	}
	s.addValue(name, 0, v)
	return len(s.Problems) == 0
}

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

// jsonBytes returns the string starting at b[i] and the index after it; plain is false when it is not a string or
// has escapes.
func jsonBytes(b []byte, i int) (s []byte, next int, plain bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
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

// yamlStream reads YAML documents as utilyaml.YAMLReader splits them (counting the separators' lines, which it
// does not). A document whose root has an `items:` key
// followed by a block sequence is read one item at a time; any other document is read whole, as addAll reads it.
func (s *Snapshot) yamlStream(name string, r *bufio.Reader) bool {
	y := yamlDocs{s: s, name: name, r: r, line: 1}
	return y.run()
}

type yamlDocs struct {
	s    *Snapshot
	name string
	r    *bufio.Reader
	line int // the line the next document starts at
	// whole reads every document whole (addAll), reporting a bad separator as a problem instead of giving up.
	whole bool

	doc      []byte // the document so far, or in a List the lines outside its items
	docLines int
	inItems  bool
	listDone bool // the items block of this document ended
	dash     int  // the column of the items' dashes
	item     []byte
	items    int
	scratch  []byte
}

func (y *yamlDocs) run() bool {
	var buf []byte
	for {
		line, isPrefix, err := y.r.ReadLine()
		buf = append(buf[:0], line...)
		for isPrefix && err == nil {
			line, isPrefix, err = y.r.ReadLine()
			buf = append(buf, line...)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return false
		}
		eof := err != nil
		if !eof {
			buf = append(buf, '\n')
		}
		if bytes.HasPrefix(buf, []byte("---")) {
			rest := strings.TrimSpace(string(buf[3:]))
			if rest != "" && rest[0] != '#' {
				if !y.whole {
					return false // addAll reports the bad separator
				}
				// As utilyaml.YAMLReader: the rest of the file is not read.
				y.s.Problems = append(y.s.Problems, Problem{File: y.name, Line: y.line + y.docLines,
					Err: "invalid Yaml document separator: " + rest})
				return true
			}
			if !y.endDoc() {
				return false
			}
			y.line++ // the separator
			if eof {
				return true
			}
			continue
		}
		if eof {
			return y.endDoc()
		}
		if !y.addLine(buf) {
			return false
		}
	}
}

func indentOf(l []byte) int {
	n := 0
	for n < len(l) && l[n] == ' ' {
		n++
	}
	return n
}

// isBlank reports an empty or comment-only line.
func isBlank(l []byte) bool {
	t := bytes.TrimLeft(l, " \t\r\n")
	return len(t) == 0 || t[0] == '#'
}

// isItemsKey reports the line `items:` (nothing after it but spaces or a comment) at column 0.
func isItemsKey(l []byte) bool {
	if !bytes.HasPrefix(l, []byte("items:")) {
		return false
	}
	return isBlank(l[len("items:"):])
}

func (y *yamlDocs) addLine(l []byte) bool {
	y.docLines++
	if !y.inItems {
		if !y.whole && isItemsKey(l) {
			if y.listDone || !rootAtColumn0(y.doc) {
				return false // a second items key, or a root indented (where items: cannot be its key)
			}
			y.inItems, y.dash = true, -1
			return true
		}
		y.doc = append(y.doc, l...)
		return true
	}
	if isBlank(l) {
		if len(y.item) > 0 {
			y.item = append(y.item, l...)
		}
		return true
	}
	ind := indentOf(l)
	if y.dash < 0 { // the first item
		if !isDashLine(l, ind) {
			return false // items is not a block sequence (or is empty): addAll
		}
		y.dash = ind
	}
	switch {
	case ind > y.dash:
		if len(y.item) == 0 {
			return false
		}
		y.item = append(y.item, l...)
	case ind == y.dash && isDashLine(l, ind):
		if !y.endItem() {
			return false
		}
		y.item = append(y.item, l...)
	case ind < y.dash || (ind == 0 && l[0] != '-'):
		// The items block ended; the line is the next key of the root.
		if !y.endItem() {
			return false
		}
		y.inItems, y.listDone = false, true
		y.doc = append(y.doc, l...)
	default:
		return false
	}
	return true
}

// rootAtColumn0 reports whether the first line of doc that is not blank (if any) starts at column 0.
func rootAtColumn0(doc []byte) bool {
	for len(doc) > 0 {
		i := bytes.IndexByte(doc, '\n')
		if i < 0 {
			i = len(doc) - 1
		}
		if l := doc[:i+1]; !isBlank(l) {
			return l[0] != ' '
		}
		doc = doc[i+1:]
	}
	return true
}

// isDashLine reports a line "- something" with its dash at column ind.
func isDashLine(l []byte, ind int) bool {
	return len(l) > ind+2 && l[ind] == '-' && l[ind+1] == ' ' && !isBlank(l[ind+2:])
}

// endItem adds the item read so far, dedented to a document of its own.
func (y *yamlDocs) endItem() bool {
	if len(y.item) == 0 {
		return true
	}
	item := y.item
	y.item = y.item[:0]
	// The item's keys start where its first line's content does; the dash becomes a space.
	first := item[:bytes.IndexByte(item, '\n')+1]
	key := y.dash + 1 + indentOf(first[y.dash+1:])
	doc := append(y.scratch[:0], first[key:]...)
	for rest := item[len(first):]; len(rest) > 0; {
		l := rest[:bytes.IndexByte(rest, '\n')+1]
		rest = rest[len(l):]
		switch {
		case indentOf(l) >= key:
			doc = append(doc, l[key:]...)
		case isBlank(l):
			doc = append(doc, '\n')
		default:
			y.scratch = doc
			return false // less indented than the item's keys: addAll
		}
	}
	y.scratch = doc
	y.items++
	if y.s.KeepUsedOnly {
		if t := sniffYAML(doc); t.sure && !mayKeep(t.gk, doc) {
			y.s.count(t.gk)
			return true
		}
	}
	if m, ok := decodeYAMLFast(doc); ok {
		y.s.addValue(y.name, 0, m)
		return len(y.s.Problems) == 0
	}
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return false
	}
	var v interface{}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return false
	}
	y.s.addValue(y.name, 0, v)
	return len(y.s.Problems) == 0
}

// endDoc adds the document read so far, as addAll would.
func (y *yamlDocs) endDoc() bool {
	defer func() {
		y.line += y.docLines
		y.doc, y.docLines, y.inItems, y.listDone, y.items = y.doc[:0], 0, false, false, 0
	}()
	if y.inItems || y.listDone {
		if y.inItems && !y.endItem() {
			return false
		}
		// The root without its items: a List (or no kind) for its items to count.
		js, err := yaml.YAMLToJSON(y.doc)
		if err != nil {
			return false
		}
		var root interface{}
		if err := json.Unmarshal(js, &root); err != nil {
			return false
		}
		if root != nil {
			m, ok := root.(map[string]interface{})
			if !ok {
				return false
			}
			kind, _ := m["kind"].(string)
			if !strings.HasSuffix(kind, "List") && kind != "" {
				return false
			}
		}
		return y.items > 0 // `items:` with nothing under it is null, not a List: addAll
	}
	if y.docLines == 0 {
		return true
	}
	doc := y.doc
	start := y.line + leadingBlankLines(doc)
	if len(bytes.TrimSpace(stripComments(doc))) == 0 {
		return true
	}
	// A document of its own is always decoded, so a syntax error in it is reported whatever its kind.
	if m, ok := decodeYAMLFast(doc); ok {
		y.s.addValue(y.name, start, m)
		return true
	}
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		y.s.Problems = append(y.s.Problems, Problem{File: y.name, Line: start + errLine(err), Err: cleanErr(err)})
		return true
	}
	y.s.addJSON(y.name+":"+strconv.Itoa(start), js)
	return true
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
