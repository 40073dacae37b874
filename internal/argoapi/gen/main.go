// Command gen writes internal/argoapi: a copy of the Argo CD API types and application gRPC client that syncmedic
// uses, without the server-side helpers that make importing them pull in Helm, go-git, kubectl and
// k8s.io/kubernetes (issue 16 item 5).
//
// It copies the pinned modules' files from the module cache (go list -m finds them), rewrites the imports between
// the copied packages, drops every import of another Argo CD or gitops-engine package, and then removes, one
// compile at a time, each function, method, variable or constant that no longer compiles, until the packages
// build. Types are never removed: if a type stops compiling the generator fails. Run it from the module root with
// `go generate ./internal/argoapi` after a bump of argo-cd/v2 or gitops-engine; TestCopyIsFromThePinnedModules
// fails until then.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

const self = "github.com/syncmedic/syncmedic/internal/argoapi"

// A copy is one package of the copy: the files taken from an upstream package.
type copy struct {
	module, dir string   // upstream module path and package directory inside it
	files       []string // upstream files copied (the rest of the package is left out)
	to          string   // the copy's directory under internal/argoapi
	// dropTypes are upstream types left out on purpose (they hold a dropped package's types and nothing in the copy
	// or in syncmedic uses them).
	dropTypes []string
	// keep are functions never removed: an error in one waits for the next round (it may come from a method removed
	// in this one) and fails the generator if nothing else is left to remove.
	keep []string
	// dropLines are lines removed before compiling.
	dropLines *regexp.Regexp
}

var copies = []copy{
	{module: "github.com/argoproj/gitops-engine", dir: "pkg/sync/common", files: []string{"types.go"}, to: "synccommon",
		dropTypes: []string{"ResourceSyncResult"}},
	{module: "github.com/argoproj/gitops-engine", dir: "pkg/sync/resource", files: []string{"annotations.go"}, to: "syncresource"},
	{module: "github.com/argoproj/gitops-engine", dir: "pkg/sync/hook/helm", files: []string{"delete_policy.go", "hook.go", "type.go", "weight.go"}, to: "synchook/helm"},
	{module: "github.com/argoproj/gitops-engine", dir: "pkg/sync/hook", files: []string{"delete_policy.go", "hook.go"}, to: "synchook"},
	{module: "github.com/argoproj/gitops-engine", dir: "pkg/health", files: []string{"health.go"}, to: "health"},
	{module: "github.com/argoproj/argo-cd/v2", dir: "pkg/apis/application/v1alpha1", to: "v1alpha1", files: []string{
		"app_project_types.go", "application_annotations.go", "application_defaults.go", "applicationset_types.go",
		"cluster_constants.go", "doc.go", "generated.pb.go", "register.go", "repository_types.go", "types.go",
		"values.go", "zz_generated.deepcopy.go",
	}},
	{module: "github.com/argoproj/argo-cd/v2", dir: "pkg/apiclient/application", files: []string{"application.pb.go"}, to: "application",
		dropTypes: []string{"ApplicationServiceServer", "UnimplementedApplicationServiceServer",
			"ApplicationService_GetManifestsWithFilesClient", "ApplicationService_GetManifestsWithFilesServer"},
		keep: []string{"NewApplicationServiceClient", "_ApplicationService_serviceDesc"},
		// The service descriptor's server handlers: the client uses only its stream descriptions.
		dropLines: regexp.MustCompile(`(?m)^[ \t]*(Handler|HandlerType): .*\n`)},
	// The ApplicationSet service: argocd/rollingsync-stalled lists ApplicationSets through argocd-server.
	{module: "github.com/argoproj/argo-cd/v2", dir: "pkg/apiclient/applicationset", files: []string{"applicationset.pb.go"}, to: "applicationset",
		dropTypes: []string{"ApplicationSetServiceServer", "UnimplementedApplicationSetServiceServer"},
		keep:      []string{"NewApplicationSetServiceClient", "_ApplicationSetService_serviceDesc"},
		dropLines: regexp.MustCompile(`(?m)^[ \t]*(Handler|HandlerType): .*\n`)},
}

// rename maps upstream import paths to the copy's.
var rename = map[string]string{
	"github.com/argoproj/gitops-engine/pkg/sync/common":            self + "/synccommon",
	"github.com/argoproj/gitops-engine/pkg/health":                 self + "/health",
	"github.com/argoproj/gitops-engine/pkg/sync/resource":          self + "/syncresource",
	"github.com/argoproj/gitops-engine/pkg/sync/hook":              self + "/synchook",
	"github.com/argoproj/gitops-engine/pkg/sync/hook/helm":         self + "/synchook/helm",
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1": self + "/v1alpha1",
	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application":     self + "/application",
	"github.com/argoproj/argo-cd/v2/pkg/apiclient/applicationset":  self + "/applicationset",
	"github.com/argoproj/argo-cd/v2/pkg/apis/application":          "", // constants only: kept
	"github.com/gogo/protobuf/proto":                               "",
	"github.com/gogo/protobuf/sortkeys":                            "",
	"google.golang.org/genproto/googleapis/api/annotations":        "",
	"k8s.io/apimachinery/pkg/apis/meta/v1":                         "",
	"k8s.io/api/core/v1":                                           "",
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1":     "",
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured":            "",
	"k8s.io/apimachinery/pkg/runtime":                              "",
	"k8s.io/apimachinery/pkg/runtime/schema":                       "",
	"k8s.io/apimachinery/pkg/util/intstr":                          "",
	"k8s.io/apimachinery/pkg/watch":                                "",
}

// dropped reports whether an import is left out of the copy: every other Argo CD and gitops-engine package (the
// heavy ones), kube-openapi and the kubeconfig loaders.
func dropped(path string) bool {
	if _, ok := rename[path]; ok {
		return false
	}
	switch {
	case strings.HasPrefix(path, "github.com/argoproj/"),
		strings.HasPrefix(path, "k8s.io/kube-openapi"),
		strings.HasPrefix(path, "k8s.io/client-go/tools/clientcmd"):
		return true
	}
	return false
}

func main() {
	root, err := os.Getwd()
	check(err)
	for { // go generate runs in the package's directory
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(root) == root {
			fail("no go.mod above the working directory")
		}
		root = filepath.Dir(root)
	}
	out := filepath.Join(root, "internal", "argoapi")
	var sources []string
	for _, c := range copies {
		modDir, version := module(c.module)
		dst := filepath.Join(out, c.to)
		check(os.MkdirAll(dst, 0o755))
		for _, old := range files(dst) { // the last copy's files (directories of nested copies stay)
			check(os.Remove(old))
		}
		for _, f := range c.files {
			src, err := os.ReadFile(filepath.Join(modDir, c.dir, f))
			check(err)
			sum := sha256.Sum256(src)
			sources = append(sources, fmt.Sprintf("%s@%s %s/%s %s", c.module, version, c.dir, f, hex.EncodeToString(sum[:])))
			header := fmt.Sprintf("// Code generated by internal/argoapi/gen from %s@%s/%s/%s. DO NOT EDIT.\n\n", c.module, version, c.dir, f)
			check(os.WriteFile(filepath.Join(dst, f), append([]byte(header), rewrite(src, c)...), 0o644))
		}
	}
	for _, c := range copies {
		prune(root, filepath.Join(out, c.to), c.keep)
	}
	// SOURCES records the hash of every upstream file and of every file written from it: TestCopyIsFromThePinnedModules
	// fails when either changes (a bump of the modules, or a hand edit of the copy).
	for _, c := range copies {
		for _, f := range files(filepath.Join(out, c.to)) {
			b, err := os.ReadFile(f)
			check(err)
			sum := sha256.Sum256(b)
			rel, err := filepath.Rel(root, f)
			check(err)
			sources = append(sources, fmt.Sprintf("copy %s %s", filepath.ToSlash(rel), hex.EncodeToString(sum[:])))
		}
	}
	sort.Strings(sources)
	check(os.WriteFile(filepath.Join(out, "SOURCES"), []byte(strings.Join(sources, "\n")+"\n"), 0o644))
}

// module returns the module cache directory and version of a required module.
func module(path string) (dir, version string) {
	b, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", path).Output()
	check(err)
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "" {
		fail("module %s is not in the module cache (go mod download %s)", path, path)
	}
	return f[0], f[1]
}

// rewrite renames and drops imports, and removes the gogo registrations (the upstream package registers the same
// names; tests link both).
func rewrite(src []byte, c copy) []byte {
	if c.dropLines != nil {
		src = c.dropLines.ReplaceAll(src, nil)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ParseComments)
	check(err)
	var cuts []span
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if to := rename[p]; to != "" {
			cuts = append(cuts, span{fset.Position(imp.Path.Pos()).Offset, fset.Position(imp.Path.End()).Offset, strconv.Quote(to)})
		} else if dropped(p) {
			cuts = append(cuts, span{lineStart(src, fset.Position(imp.Pos()).Offset), lineEnd(src, fset.Position(imp.End()).Offset), ""})
		}
	}
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE && len(gd.Specs) == 1 {
			for _, name := range c.dropTypes {
				if gd.Specs[0].(*ast.TypeSpec).Name.Name == name {
					cuts = append(cuts, declSpan(fset, src, gd, gd.Doc))
				}
			}
		}
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "init" && fd.Recv == nil {
			body := string(src[fset.Position(fd.Pos()).Offset:fset.Position(fd.End()).Offset])
			if strings.Contains(body, "proto.Register") {
				cuts = append(cuts, declSpan(fset, src, fd, fd.Doc))
			}
		}
	}
	return apply(src, cuts)
}

type span struct {
	from, to int
	with     string
}

func apply(src []byte, cuts []span) []byte {
	sort.Slice(cuts, func(i, j int) bool {
		if cuts[i].from != cuts[j].from {
			return cuts[i].from < cuts[j].from
		}
		return cuts[i].to > cuts[j].to
	})
	var out []byte
	pos := 0
	for _, c := range cuts {
		if c.from < pos { // inside a cut already made
			pos = max(pos, c.to)
			continue
		}
		out = append(append(out, src[pos:c.from]...), c.with...)
		pos = c.to
	}
	return append(out, src[pos:]...)
}

func lineStart(src []byte, off int) int {
	for off > 0 && src[off-1] != '\n' {
		off--
	}
	return off
}

func lineEnd(src []byte, off int) int {
	for off < len(src) && src[off] != '\n' {
		off++
	}
	if off < len(src) {
		off++
	}
	return off
}

func declSpan(fset *token.FileSet, src []byte, n ast.Node, doc *ast.CommentGroup) span {
	from := n.Pos()
	if doc != nil {
		from = doc.Pos()
	}
	return span{lineStart(src, fset.Position(from).Offset), lineEnd(src, fset.Position(n.End()).Offset), ""}
}

var compileError = regexp.MustCompile(`^(\S+\.go):(\d+):(\d+): (.*)$`)

// prune compiles dir and removes what does not compile, until it does.
func prune(root, dir string, keep []string) {
	rel, err := filepath.Rel(root, dir)
	check(err)
	for round := 0; ; round++ {
		if round > 50 {
			fail("%s does not compile after 50 rounds of pruning", rel)
		}
		cmd := exec.Command("go", "build", "-gcflags=-e", "./"+filepath.ToSlash(rel))
		cmd.Dir = root
		b, err := cmd.CombinedOutput()
		if os.Getenv("GEN_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "%s round %d:\n%s\n", rel, round, b)
		}
		if err == nil {
			for _, f := range files(dir) {
				src, err := os.ReadFile(f)
				check(err)
				pretty, err := format.Source(src)
				check(err)
				check(os.WriteFile(f, pretty, 0o644))
			}
			return
		}
		byFile := map[string][]int{} // file → offending lines
		unused := map[string][]string{}
		for _, line := range strings.Split(string(b), "\n") {
			m := compileError.FindStringSubmatch(strings.TrimSpace(line))
			if m == nil {
				continue
			}
			file := m[1]
			if !filepath.IsAbs(file) {
				file = filepath.Join(root, file)
			}
			n, _ := strconv.Atoi(m[2])
			if strings.Contains(m[4], " imported ") && strings.HasSuffix(m[4], "not used") {
				unused[file] = append(unused[file], m[4])
				continue
			}
			byFile[file] = append(byFile[file], n)
		}
		if len(byFile) == 0 && len(unused) == 0 {
			fail("%s: %s", rel, b)
		}
		changed := false
		for _, f := range files(dir) {
			if len(byFile[f]) == 0 && len(unused[f]) == 0 {
				continue
			}
			src, err := os.ReadFile(f)
			check(err)
			out := cut(f, byFile[f], unused[f], keep)
			changed = changed || !bytes.Equal(src, out)
			check(os.WriteFile(f, out, 0o644))
		}
		if !changed {
			fail("%s: only kept functions fail to compile:\n%s", rel, b)
		}
	}
}

// cut removes from file the top-level declarations holding lines (a whole function, or one spec of a var or const
// group) and the imports named unused.
func cut(file string, lines []int, unused []string, keep []string) []byte {
	src, err := os.ReadFile(file)
	check(err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	check(err)
	line := func(p token.Pos) int { return fset.Position(p).Line }
	var cuts []span
	for _, n := range lines {
		found := false
		for _, d := range f.Decls {
			if n < line(d.Pos()) || n > line(d.End()) {
				continue
			}
			found = true
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && slices.Contains(keep, d.Name.Name) {
					break
				}
				cuts = append(cuts, declSpan(fset, src, d, d.Doc))
			case *ast.GenDecl:
				if d.Tok == token.TYPE {
					if m := interfaceMethod(d, n, line); m != nil { // a client method whose messages were dropped
						cuts = append(cuts, declSpan(fset, src, m, m.Doc))
						break
					}
					fail("%s:%d: a type does not compile without the dropped imports: %s", file, n, lineText(src, fset, n))
				}
				if d.Tok == token.IMPORT {
					fail("%s:%d: import error: %s", file, n, lineText(src, fset, n))
				}
				if len(d.Specs) == 1 || !d.Lparen.IsValid() {
					if slices.Contains(keep, d.Specs[0].(*ast.ValueSpec).Names[0].Name) {
						break
					}
					cuts = append(cuts, declSpan(fset, src, d, d.Doc))
					break
				}
				for _, s := range d.Specs {
					if n >= line(s.Pos()) && n <= line(s.End()) && !slices.Contains(keep, s.(*ast.ValueSpec).Names[0].Name) {
						cuts = append(cuts, declSpan(fset, src, s, s.(*ast.ValueSpec).Doc))
					}
				}
			}
		}
		if !found {
			fail("%s:%d: an error outside any declaration: %s", file, n, lineText(src, fset, n))
		}
	}
	for _, msg := range unused {
		for _, imp := range f.Imports {
			if strings.Contains(msg, imp.Path.Value) {
				cuts = append(cuts, span{lineStart(src, fset.Position(imp.Pos()).Offset), lineEnd(src, fset.Position(imp.End()).Offset), ""})
			}
		}
	}
	return apply(src, dedupe(cuts))
}

// interfaceMethod returns the method of an interface type declared by d on line n.
func interfaceMethod(d *ast.GenDecl, n int, line func(token.Pos) int) *ast.Field {
	for _, s := range d.Specs {
		it, ok := s.(*ast.TypeSpec).Type.(*ast.InterfaceType)
		if !ok {
			continue
		}
		for _, m := range it.Methods.List {
			if n >= line(m.Pos()) && n <= line(m.End()) {
				return m
			}
		}
	}
	return nil
}

func dedupe(cuts []span) []span {
	seen := map[[2]int]bool{}
	var out []span
	for _, c := range cuts {
		if !seen[[2]int{c.from, c.to}] {
			seen[[2]int{c.from, c.to}] = true
			out = append(out, c)
		}
	}
	return out
}

func lineText(src []byte, fset *token.FileSet, n int) string {
	lines := bytes.Split(src, []byte("\n"))
	if n-1 < len(lines) {
		return strings.TrimSpace(string(lines[n-1]))
	}
	return ""
}

func files(dir string) []string {
	m, err := filepath.Glob(filepath.Join(dir, "*.go"))
	check(err)
	return m
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "argoapi/gen: "+format+"\n", args...)
	os.Exit(1)
}
