package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
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
