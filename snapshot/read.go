package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// MaxFileSize is the largest file the reader accepts; larger files are reported as problems and skipped.
const MaxFileSize = 256 << 20

// Problem is a file or document the reader could not use. It never stops the rest of the read.
type Problem struct {
	File string `json:"file"`
	// Line is the 1-based line where the bad document starts (or the error's line when known); 0 when unknown.
	Line int    `json:"line,omitempty"`
	Err  string `json:"error"`
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Err)
	}
	return p.File + ": " + p.Err
}

// Snapshot is everything read from a dump: the objects, the kinds seen, and the problems met.
type Snapshot struct {
	// Objects are the objects read; with KeepUsedOnly, only those a rule reads.
	Objects  []*unstructured.Unstructured
	Problems []Problem
	// KeepUsedOnly keeps in Objects only the objects a rule reads (see keep: every object of a kind some rule uses,
	// and any other object that is terminating or is a hook), trimmed of what no rule reads (managed fields, the
	// last-applied annotation). The others are counted (Len, Summary, HasKind) and dropped; in a List, an item of a
	// kind no rule uses is counted from its text, never decoded, so a syntax error inside it goes unnoticed.
	// ReadPaths sets it.
	KeepUsedOnly bool
	kinds        map[schema.GroupKind]bool
	// counts are the objects read by kind, kept or not; total is their sum.
	counts map[string]int
	total  int
}

func (s *Snapshot) init() {
	if s.kinds == nil {
		s.kinds = map[schema.GroupKind]bool{}
	}
	if s.counts == nil {
		s.counts = map[string]int{}
	}
}

// Len is the number of objects read, including those of kinds no rule uses (which Objects does not hold).
func (s *Snapshot) Len() int { return s.total }

// count records one object read, kept or not.
func (s *Snapshot) count(gk schema.GroupKind) {
	s.kinds[gk] = true
	s.counts[gk.Kind]++
	s.total++
}

// merge adds what b read to s.
func (s *Snapshot) merge(b *Snapshot) {
	s.Objects = append(s.Objects, b.Objects...)
	s.Problems = append(s.Problems, b.Problems...)
	for gk := range b.kinds {
		s.kinds[gk] = true
	}
	for k, n := range b.counts {
		s.counts[k] += n
	}
	s.total += b.total
}

// HasKind reports whether the dump contained at least one object of the kind (even if all were filtered out), so
// rules can tell "absent" from "not dumped". An empty List of the kind also counts when kubectl names it.
func (s *Snapshot) HasKind(gk schema.GroupKind) bool { return s.kinds[gk] }

// ReadPaths reads files and directories (recursively; files ending in .yaml, .yml or .json). The error is
// non-nil only when a path cannot be opened at all; bad content becomes Problems.
func ReadPaths(paths ...string) (*Snapshot, error) {
	s := &Snapshot{KeepUsedOnly: true}
	s.init()
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		if !info.IsDir() {
			s.readFile(p)
			continue
		}
		var files []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				s.Problems = append(s.Problems, Problem{File: path, Err: err.Error()})
				return nil
			}
			if !d.IsDir() && (isDumpFile(path) || isTextDump(path)) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("snapshot: walking %s: %w", p, err)
		}
		sort.Strings(files)
		for _, f := range files {
			if isTextDump(f) {
				s.readSniffed(f)
				continue
			}
			s.readFile(f)
		}
	}
	return s, nil
}

func isDumpFile(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// isTextDump reports a file that may hold a dump saved from a terminal (`kubectl get … > dump.txt`): read from a
// directory only when its content looks like one (readSniffed), as any file named directly is.
func isTextDump(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".txt", ".log":
		return true
	}
	return false
}

// dumpSniff matches the start of a YAML or JSON Kubernetes dump.
var dumpSniff = regexp.MustCompile(`(?m)^\s*("?apiVersion"?\s*:|"?kind"?\s*:|[\[{])`)

// readSniffed reads a .txt or .log file of a directory when its first KiB looks like a dump; any other text file
// (a README, a log) is skipped without a problem.
func (s *Snapshot) readSniffed(path string) {
	f, err := os.Open(path)
	if err != nil {
		s.Problems = append(s.Problems, Problem{File: path, Err: err.Error()})
		return
	}
	head := make([]byte, 1024)
	n, err := io.ReadFull(f, head)
	f.Close()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		s.Problems = append(s.Problems, Problem{File: path, Err: err.Error()})
		return
	}
	if !dumpSniff.Match(head[:n]) {
		return
	}
	s.readFile(path)
}

// Summary says what was read: "12 objects: 5 Application, 4 Job, 3 HelmRelease", most frequent kind first.
func (s *Snapshot) Summary() string {
	counts := s.counts
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if counts[kinds[i]] != counts[kinds[j]] {
			return counts[kinds[i]] > counts[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	if len(parts) == 0 {
		return "0 objects"
	}
	return fmt.Sprintf("%d objects: %s", s.total, strings.Join(parts, ", "))
}

// readFile streams a file (addStream); a file the stream cannot take is read whole (addAll).
func (s *Snapshot) readFile(path string) {
	s.init()
	info, err := os.Stat(path)
	if err == nil && info.Size() > MaxFileSize {
		s.Problems = append(s.Problems, Problem{File: path, Err: fmt.Sprintf("file is %d bytes, over the %d byte limit", info.Size(), MaxFileSize)})
		return
	}
	if f, err := os.Open(path); err == nil {
		ok := s.addStream(path, f)
		f.Close()
		if ok {
			return
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		s.Problems = append(s.Problems, Problem{File: path, Err: err.Error()})
		return
	}
	s.addAll(path, data)
}

// Add parses one file's content (YAML with any number of documents, or JSON: an object, a List, or an array as
// `argocd app list -o json` prints) and adds its objects to the snapshot.
func (s *Snapshot) Add(name string, data []byte) {
	s.init()
	if s.addStream(name, bytes.NewReader(data)) {
		return
	}
	s.addAll(name, data)
}

// addAll parses one file's content held whole in memory, every object decoded: the reader of the files addStream
// leaves (a malformed one, or one shaped as no kubectl prints), whose results are the reference addStream matches.
func (s *Snapshot) addAll(name string, data []byte) {
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		s.addJSON(name, trimmed)
		return
	}
	y := yamlDocs{s: s, name: name, r: bufio.NewReader(bytes.NewReader(data)), line: 1, whole: true}
	y.run()
}

func (s *Snapshot) addJSON(where string, js []byte) {
	file, line := splitWhere(where)
	var v interface{}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		s.Problems = append(s.Problems, Problem{File: file, Line: line, Err: "invalid JSON: " + err.Error()})
		return
	}
	s.addValue(file, line, v)
}

func (s *Snapshot) addValue(file string, line int, v interface{}) {
	switch t := v.(type) {
	case []interface{}:
		for _, item := range t {
			s.addValue(file, line, item)
		}
	case map[string]interface{}:
		s.addObject(file, line, t)
	case nil:
	default:
		s.Problems = append(s.Problems, Problem{File: file, Line: line, Err: fmt.Sprintf("expected a Kubernetes object, got %T", v)})
	}
}

func (s *Snapshot) addObject(file string, line int, m map[string]interface{}) {
	m = normalizeNumbers(m).(map[string]interface{})
	kind, _ := m["kind"].(string)
	apiVersion, _ := m["apiVersion"].(string)
	if items, ok := m["items"].([]interface{}); ok && (strings.HasSuffix(kind, "List") || kind == "") {
		for _, item := range items {
			s.addValue(file, line, item)
		}
		return
	}
	if kind == "" && looksLikeApplication(m) {
		// `argocd app get -o json` prints the Application without its type metadata.
		kind, apiVersion = "Application", "argoproj.io/v1alpha1"
		m["kind"], m["apiVersion"] = kind, apiVersion
	}
	if kind == "" || apiVersion == "" {
		return // not a Kubernetes object (unknown content is skipped, not an error)
	}
	if _, ok := m["metadata"].(map[string]interface{}); !ok {
		s.Problems = append(s.Problems, Problem{File: file, Line: line, Err: fmt.Sprintf("%s %s has no metadata", apiVersion, kind)})
		return
	}
	u := &unstructured.Unstructured{Object: m}
	s.count(u.GroupVersionKind().GroupKind())
	if !s.KeepUsedOnly {
		s.Objects = append(s.Objects, u)
	} else if keep(u) {
		trim(u)
		s.Objects = append(s.Objects, u)
	}
}

func looksLikeApplication(m map[string]interface{}) bool {
	spec, ok := m["spec"].(map[string]interface{})
	if !ok {
		return false
	}
	_, dest := spec["destination"]
	_, src := spec["source"]
	_, srcs := spec["sources"]
	_, meta := m["metadata"]
	return meta && dest && (src || srcs)
}

// normalizeNumbers turns json.Number into int64 or float64, as unstructured objects expect.
func normalizeNumbers(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		for k, x := range t {
			t[k] = normalizeNumbers(x)
		}
		return t
	case []interface{}:
		for i, x := range t {
			t[i] = normalizeNumbers(x)
		}
		return t
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	}
	return v
}

var lineRe = regexp.MustCompile(`line (\d+)`)

// errLine returns the line offset a YAML error names (1-based within the document), minus one, or 0.
func errLine(err error) int {
	if m := lineRe.FindStringSubmatch(err.Error()); m != nil {
		if n, _ := strconv.Atoi(m[1]); n > 0 {
			return n - 1
		}
	}
	return 0
}

// errLinePrefix is the "line N: " a YAML error starts with; Problem.Line carries the line (in the file), so the
// message drops it rather than print a second, document-relative line number.
var errLinePrefix = regexp.MustCompile(`^line \d+: `)

func cleanErr(err error) string {
	msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "), "yaml: ")
	return errLinePrefix.ReplaceAllString(msg, "")
}

func leadingBlankLines(doc []byte) int {
	n := 0
	for _, l := range bytes.Split(doc, []byte("\n")) {
		t := bytes.TrimSpace(l)
		if len(t) != 0 && !bytes.HasPrefix(t, []byte("#")) && !bytes.Equal(t, []byte("---")) {
			return n
		}
		n++
	}
	return 0
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		t := bytes.TrimSpace(l)
		if bytes.HasPrefix(t, []byte("#")) || bytes.Equal(t, []byte("---")) {
			continue
		}
		out = append(out, l)
	}
	return bytes.Join(out, []byte("\n"))
}

func splitWhere(where string) (string, int) {
	if i := strings.LastIndex(where, ":"); i > 0 {
		if n, err := strconv.Atoi(where[i+1:]); err == nil {
			return where[:i], n
		}
	}
	return where, 0
}

// AddLive adds objects read from a live cluster (a List of one kind) and records that the kind was looked at, even
// when the list is empty, so rules can tell "absent" from "not looked at" exactly as for a dump.
func (s *Snapshot) AddLive(gk schema.GroupKind, objs []unstructured.Unstructured) {
	s.init()
	s.kinds[gk] = true
	for i := range objs {
		s.count(objs[i].GroupVersionKind().GroupKind())
		s.Objects = append(s.Objects, &objs[i])
	}
}
