package cmp

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/ignore"

	"github.com/syncmedic/syncmedic/argocd/cmp/repofs"
)

// Limits on what a chart may make the plugin read, decompress and parse: Helm 3.18.5 added such limits to fix
// CVE-2025-32386 and CVE-2025-32387; they are checked here too, before Helm's loader sees the bytes.
const (
	// MaxChartSize is the most a chart may hold: its files plus everything its subchart archives (charts/*.tgz, nested
	// ones too) decompress to. Each file, in the directory or in an archive, is also limited to repofs.MaxFileSize.
	MaxChartSize = 100 << 20 // 100 MiB
	// MaxChartDepth is how deep a chart's directories and subchart archives may nest.
	MaxChartDepth = 32
	// MaxSchemaRefs is how many "$ref"s a chart's values.schema.json may hold (all of them local, "#…").
	MaxSchemaRefs = 256
	// MaxSchemaDepth is how deeply a values.schema.json may nest.
	MaxSchemaDepth = 64
	// tarHeaderSize is what each archive entry costs besides its data, so that a bomb of empty entries is counted too.
	tarHeaderSize = 512
)

var utf8bom = []byte{0xEF, 0xBB, 0xBF}

// loadChart is Helm's loader.LoadDir confined to root: the chart directory and every file or symbolic link in it must
// be inside the repository, each file regular and at most repofs.MaxFileSize, the whole chart (subchart archives
// decompressed) at most MaxChartSize, and each values.schema.json's "$ref"s local and bounded (checkSchemas), all
// before Helm's loader sees the bytes.
func loadChart(root *repofs.Root, dir string) (*chart.Chart, error) {
	top, err := root.ResolvePath(dir)
	if err != nil {
		return nil, fmt.Errorf("chart directory %w", err)
	}
	rules := ignore.Empty()
	switch b, err := root.ReadFile(filepath.Join(top, ignore.HelmIgnore)); {
	case err == nil:
		if rules, err = ignore.Parse(bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
	case !errors.Is(err, repofs.ErrNotExist):
		return nil, fmt.Errorf("chart file %s %w", ignore.HelmIgnore, err)
	}
	rules.AddDefaults()
	l := &chartReader{root: root, rules: rules, budget: MaxChartSize}
	if err := l.walk(top, "", 0); err != nil {
		return nil, err
	}
	ch, err := loader.LoadFiles(l.files)
	if err != nil {
		return nil, err
	}
	if err := checkSchemas(ch); err != nil {
		return nil, err
	}
	return ch, nil
}

// chartReader collects a chart directory's files the way Helm's LoadDir does (helmignore rules, symbolic links
// followed, a UTF-8 byte order mark removed), within the limits.
type chartReader struct {
	root   *repofs.Root
	rules  *ignore.Rules
	budget int64
	files  []*loader.BufferedFile
}

// walk reads the directory real (symbolic-link free) whose chart-relative name is name.
func (l *chartReader) walk(real, name string, depth int) error {
	if depth > MaxChartDepth {
		return fmt.Errorf("chart directory %s nests deeper than %d levels", name, MaxChartDepth)
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := path.Join(name, e.Name())
		p := filepath.Join(real, e.Name())
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if p, err = l.root.ResolvePath(p); err != nil {
				return fmt.Errorf("chart file %s %w: a chart reads only files inside the repository", n, err)
			}
			if fi, err = os.Stat(p); err != nil {
				return err
			}
		}
		if l.rules.Ignore(n, fi) {
			continue
		}
		if fi.IsDir() {
			if err := l.walk(p, n, depth+1); err != nil {
				return err
			}
			continue
		}
		data, err := l.root.ReadFile(p)
		if err != nil {
			return fmt.Errorf("chart file %s %w: a chart reads only regular files inside the repository, of at most %d MiB each", n, err, repofs.MaxFileSize>>20)
		}
		if l.budget -= int64(len(data)); l.budget < 0 {
			return fmt.Errorf("chart is larger than the %d MiB limit", MaxChartSize>>20)
		}
		if strings.HasSuffix(n, ".tgz") {
			if err := checkArchive(data, &l.budget, depth); err != nil {
				return fmt.Errorf("chart archive %s: %w", n, err)
			}
		}
		l.files = append(l.files, &loader.BufferedFile{Name: n, Data: bytes.TrimPrefix(data, utf8bom)})
	}
	return nil
}

// checkArchive decompresses a subchart archive, and the archives inside it, without keeping them, and fails as soon
// as a file exceeds repofs.MaxFileSize or everything together *budget. Helm's loader decompresses it again only after.
func checkArchive(data []byte, budget *int64, depth int) error {
	if depth > MaxChartDepth {
		return fmt.Errorf("archives nest deeper than %d levels", MaxChartDepth)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for {
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		n, err := io.Copy(&buf, io.LimitReader(tr, repofs.MaxFileSize+1))
		if err != nil {
			return err
		}
		if n > repofs.MaxFileSize {
			return fmt.Errorf("%s decompresses to more than the %d MiB limit per file", hd.Name, repofs.MaxFileSize>>20)
		}
		if *budget -= n + tarHeaderSize; *budget < 0 {
			return fmt.Errorf("decompresses to more than the %d MiB chart limit", MaxChartSize>>20)
		}
		if strings.HasSuffix(hd.Name, ".tgz") {
			if err := checkArchive(buf.Bytes(), budget, depth+1); err != nil {
				return fmt.Errorf("%s: %w", hd.Name, err)
			}
		}
	}
}

// checkSchemas refuses a values.schema.json, in the chart or a subchart, that Helm's validator would follow out of
// the chart (a "$ref" to a URL or a file) or that nests or refers more than MaxSchemaDepth / MaxSchemaRefs.
func checkSchemas(ch *chart.Chart) error {
	if len(ch.Schema) > 0 {
		var doc interface{}
		if err := json.Unmarshal(ch.Schema, &doc); err != nil {
			return fmt.Errorf("chart %s: values.schema.json: %w", ch.ChartFullPath(), err)
		}
		refs := 0
		if err := walkSchema(doc, 0, &refs); err != nil {
			return fmt.Errorf("chart %s: values.schema.json: %w", ch.ChartFullPath(), err)
		}
	}
	for _, dep := range ch.Dependencies() {
		if err := checkSchemas(dep); err != nil {
			return err
		}
	}
	return nil
}

func walkSchema(v interface{}, depth int, refs *int) error {
	if depth > MaxSchemaDepth {
		return fmt.Errorf("nests deeper than %d levels", MaxSchemaDepth)
	}
	switch v := v.(type) {
	case map[string]interface{}:
		for k, x := range v {
			if k == "$ref" {
				ref, _ := x.(string)
				if !strings.HasPrefix(ref, "#") {
					return fmt.Errorf("$ref %q is not local to the schema: refer to definitions inside it (\"#/…\")", ref)
				}
				if *refs++; *refs > MaxSchemaRefs {
					return fmt.Errorf("has more than %d $refs", MaxSchemaRefs)
				}
			}
			if err := walkSchema(x, depth+1, refs); err != nil {
				return err
			}
		}
	case []interface{}:
		for _, x := range v {
			if err := walkSchema(x, depth+1, refs); err != nil {
				return err
			}
		}
	}
	return nil
}
