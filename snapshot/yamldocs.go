package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

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
	if !y.whole && bytes.IndexByte(l, '\r') >= 0 {
		// A carriage return not followed by a newline (ReadLine strips "\r\n") breaks the line for YAML but not
		// for this line reader, which would read its rest as part of an item: addAll (found by FuzzStream).
		return false
	}
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
