package cmp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"

	"github.com/syncmedic/syncmedic/argocd/cmp/repofs"
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

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// Render renders dir, a directory inside root, reading only files inside root. The documents' bytes are exactly what
// the renderer produced; joined they are the stream the plugin prints when no fix applies. Rendering stops with an
// error when ctx ends.
func Render(ctx context.Context, root *repofs.Root, dir string, p Params) (SourceType, []Doc, error) {
	r, err := render(ctx, root, dir, p)
	return r.source, r.docs, err
}

// rendering is what render produced; again, set for Helm, runs the chart's templates once more on the chart and
// values already read.
type rendering struct {
	source SourceType
	docs   []Doc
	again  func(context.Context) ([]Doc, error)
}

func render(ctx context.Context, root *repofs.Root, dir string, p Params) (rendering, error) {
	real, err := root.ResolvePath(dir)
	if err != nil {
		return rendering{source: SourceDirectory}, fmt.Errorf("app directory %s %w", dir, err)
	}
	r := rendering{source: Detect(real)}
	switch r.source {
	case SourceHelm:
		var h *helmRelease
		if h, err = loadHelm(root, real, p); err == nil {
			r.again = h.render
			r.docs, err = h.render(ctx)
		}
	case SourceKustomize:
		r.docs, err = untilDone(ctx, "kustomize build", func() ([]Doc, error) { return renderKustomize(root, real, p) })
	default:
		r.docs, err = renderDirectory(root, real, p.Recurse)
	}
	if err != nil {
		return rendering{source: r.source}, fmt.Errorf("render %s: %w", strings.ToLower(string(r.source)), err)
	}
	return r, nil
}

// untilDone returns what f returns, or an error when ctx ends first. f keeps running then (Helm's engine and
// kustomize take no context); the caller is expected to give up on the render, as the generate command does by
// exiting.
func untilDone[T any](ctx context.Context, what string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return zero, fmt.Errorf("%s did not finish within the render deadline: %w", what, ctx.Err())
		}
		return zero, fmt.Errorf("%s: %w", what, ctx.Err())
	}
}

// manifestExts are the files Argo CD's directory source reads.
var manifestExts = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// renderDirectory concatenates the manifest files of dir in lexical order, each file's bytes unchanged, with a
// "---" line between files where the next file does not start with one.
// Each file is read through root (regular files only, at most repofs.MaxFileSize each).
func renderDirectory(root *repofs.Root, dir string, recurse bool) ([]Doc, error) {
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
		b, err := root.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s %w", path, err)
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
