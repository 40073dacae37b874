package cmp

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// SourceType is how an app directory is rendered.
type SourceType string

// The source types, detected the way Argo CD detects them: a Chart.yaml makes a Helm chart, a kustomization file a
// kustomization, anything else a plain directory of YAML/JSON files.
const (
	SourceDirectory SourceType = "Directory"
	SourceKustomize SourceType = "Kustomize"
	SourceHelm      SourceType = "Helm"
)

// Detect returns how dir is rendered.
func Detect(dir string) SourceType {
	if fileExists(filepath.Join(dir, "Chart.yaml")) {
		return SourceHelm
	}
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if fileExists(filepath.Join(dir, name)) {
			return SourceKustomize
		}
	}
	return SourceDirectory
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// Render renders dir. The documents' bytes are exactly what the renderer produced; joined they are the stream the
// plugin prints when no fix applies.
func Render(ctx context.Context, dir string, p Params) (SourceType, []Doc, error) {
	t := Detect(dir)
	var docs []Doc
	var err error
	switch t {
	case SourceHelm:
		docs, err = renderHelm(ctx, dir, p)
	case SourceKustomize:
		docs, err = renderKustomize(dir)
	default:
		docs, err = renderDirectory(dir, p.Recurse)
	}
	if err != nil {
		return t, nil, fmt.Errorf("render %s: %w", strings.ToLower(string(t)), err)
	}
	return t, docs, nil
}

// renderKustomize runs kustomize (krusty, the library behind `kustomize build`) on the on-disk directory.
func renderKustomize(dir string) ([]Doc, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		return nil, err
	}
	var docs []Doc
	for i, res := range m.Resources() {
		out, err := res.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", res.CurId(), err)
		}
		if i > 0 {
			out = append([]byte("---\n"), out...) // exactly resmap.AsYaml's separator
		}
		docs = append(docs, Doc{Raw: out})
	}
	return docs, nil
}

// manifestExts are the files Argo CD's directory source reads.
var manifestExts = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// renderDirectory concatenates the manifest files of dir in lexical order, each file's bytes unchanged, with a
// "---" line between files where the next file does not start with one.
func renderDirectory(dir string, recurse bool) ([]Doc, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && (!recurse || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(d.Name(), ".") && manifestExts[strings.ToLower(filepath.Ext(path))] && d.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var docs []Doc
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		rel, _ := filepath.Rel(dir, path)
		fileDocs := SplitStream(b)
		for i := range fileDocs {
			fileDocs[i].Source = filepath.ToSlash(rel)
		}
		if len(docs) > 0 {
			last := &docs[len(docs)-1]
			if !bytes.HasSuffix(last.Raw, []byte("\n")) {
				last.Raw = append(last.Raw[:len(last.Raw):len(last.Raw)], '\n')
			}
			if !isSeparator(firstLine(fileDocs[0].Raw)) {
				fileDocs[0].Raw = append([]byte("---\n"), fileDocs[0].Raw...)
			}
		}
		docs = append(docs, fileDocs...)
	}
	if len(docs) > 0 && startsWithJSON(docs[0].Raw) && len(docs) > 1 {
		// A stream that starts with '{' is decoded as JSON to the end by Argo CD (YAMLOrJSONDecoder), so a YAML
		// document after it would fail; a leading "---" makes the whole stream YAML, which JSON documents are too.
		docs[0].Raw = append([]byte("---\n"), docs[0].Raw...)
	}
	return docs, nil
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i+1]
	}
	return b
}

func startsWithJSON(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}
