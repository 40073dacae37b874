package conformance

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// handWrittenMarker is what a test says right above a write of a controller's state (issue 12): which state, and why
// no controller reaches it in that test.
const handWrittenMarker = "hand-written state:"

// markerReach is how many lines above a call its marker may be.
const markerReach = 6

// stateWriters are the calls that write an Application's status or operation state, Argo CD's controller cache
// (resource tree, managed resources) or a HelmRelease's status by hand, whatever their receiver. Status().Update,
// Status().Patch and SubResource("status") writes are matched by shape (statusWrite).
var stateWriters = map[string]bool{
	"SetOperationState":        true, // testenv.ArgoCDServer
	"SetResourceTree":          true,
	"SetManagedResources":      true,
	"SetResources":             true,
	"UpdateStatus":             true, // client-go typed and dynamic clients
	"ScenarioPreV2beta2Status": true, // fluxreal.Stack: a real release, its status then replaced by hand
}

// testenvWriters are testenv's scenario builders that write such status. They count only as testenv.X (or X inside
// package testenv): fluxreal.Stack has methods of the same name driven by the real helm-controller.
var testenvWriters = map[string]bool{
	"ScenarioHookCompletionMissed": true,
	"ScenarioHelmReleaseOldStatus": true,
	"ScenarioDependencyNotReady":   true,
}

// pendingElsewhere are the files other engineers were editing when this guard was written, with the number of
// writes in each still without a marker. The guard fails when a count no longer matches, so an entry is removed
// (or lowered) as soon as its markers are added and cannot hide a new write.
var pendingElsewhere = map[string]int{} // empty: every site in the module says why

// site is one write of a controller's state found by the detector.
type site struct {
	pos  token.Position
	call string
}

func (s site) String() string { return s.pos.String() + ": " + s.call }

// TestEveryHandWrittenControllerStateSaysWhy walks the module's test files and bench/ and fails, naming file:line,
// on any write of an Application's status or operation state, Argo CD's controller cache or a HelmRelease's status
// (directly or through a helper of the same package that does it) without a "// hand-written state:" comment within
// 6 lines above it or on the enclosing function's doc comment.
func TestEveryHandWrittenControllerStateSaysWhy(t *testing.T) {
	root := moduleRoot(t)
	dirs := map[string][]string{} // package directory → the files to check
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", ".git", "testdata", "vendor":
				return filepath.SkipDir
			}
			if rel == "tools" || rel == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		bench := strings.HasPrefix(rel, "bench"+string(filepath.Separator))
		if strings.HasSuffix(path, "_test.go") || (bench && strings.HasSuffix(path, ".go")) {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, dirs, filepath.Join(root, "argocd"), "the walk reaches the hand-driven tests")

	fset := token.NewFileSet()
	var missing []site
	perFile := map[string]int{}
	for _, paths := range dirs {
		var files []*ast.File
		for _, p := range paths {
			f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
			require.NoError(t, err)
			files = append(files, f)
		}
		for _, s := range uncommentedWrites(fset, files) {
			rel, _ := filepath.Rel(root, s.pos.Filename)
			s.pos.Filename = filepath.ToSlash(rel)
			if _, pending := pendingElsewhere[s.pos.Filename]; pending {
				perFile[s.pos.Filename]++
				continue
			}
			missing = append(missing, s)
		}
	}
	for file, want := range pendingElsewhere {
		require.Equal(t, want, perFile[file], "pendingElsewhere[%q] is out of date: shrink it (markers added) or say why it grew", file)
	}
	if len(missing) == 0 {
		return
	}
	sortSites(missing)
	lines := make([]string, len(missing))
	for i, s := range missing {
		lines[i] = "\t" + s.String()
	}
	require.Failf(t, "writes of a controller's state without a reason", "%d writes of a controller's state by hand need a %q comment saying which state and why no controller "+
		"reaches it in that test (naming the real-controller test that proves it, if one does), within %d lines above "+
		"the call or on the enclosing function's doc comment:\n%s", len(missing), "// "+handWrittenMarker, markerReach,
		strings.Join(lines, "\n"))
}

func TestTheDetectorFindsStateWritesThatDoNotSayWhy(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // "line: call" of each uncommented write
	}{
		{
			name: "a write with the marker right above it passes",
			src: `package p
func f() {
	// hand-written state: an operation Running for 3 hours, which no controller reaches on demand.
	argo.SetOperationState(t, "app", op)
}`,
		},
		{
			name: "a write without the marker fails",
			src: `package p
func f() {
	argo.SetOperationState(t, "app", op)
}`,
			want: []string{"3: argo.SetOperationState"},
		},
		{
			name: "a marker further than 6 lines above does not count",
			src: `package p
func f() {
	// hand-written state: too far away.
	a()
	a()
	a()
	a()
	a()
	a()
	argo.SetResources(t, "app", job)
}`,
			want: []string{"10: argo.SetResources"},
		},
		{
			name: "the enclosing function's doc comment covers its writes",
			src: `package p
// f writes the tree.
//
// hand-written state: the in-process argocd-server runs no application-controller.
func f() {
	a()
	a()
	a()
	a()
	a()
	a()
	a()
	argo.SetResourceTree(t, "app", tree)
}`,
		},
		{
			name: "a status subresource write fails without the marker",
			src: `package p
func f() {
	require.NoError(t, env.Client.Status().Update(ctx, hr))
	_ = env.Client.Status().Patch(ctx, hr, patch)
	_ = env.Client.SubResource("status").Update(ctx, hr)
	_, _ = hrs.UpdateStatus(ctx, obj, opts)
}`,
			want: []string{"3: Status().Update", "4: Status().Patch", "5: SubResource(\"status\").Update", "6: hrs.UpdateStatus"},
		},
		{
			name: "a helper that writes makes each of its callers a site too",
			src: `package p
// setStatus writes status.
//
// hand-written state: see the callers.
func setStatus() { _ = c.Status().Update(ctx, hr) }
func g() {
	setStatus()
	// hand-written state: a stale v2beta1 status, which no helm-controller that downloads writes.
	setStatus()
}`,
			want: []string{"7: setStatus"},
		},
		{
			name: "testenv's hand-written scenarios count, the real-controller ones of the same name do not",
			src: `package p
func f() {
	testenv.ScenarioDependencyNotReady(t, env, ns)
	stack.ScenarioDependencyNotReady(t, ns, repo)
	testenv.ScenarioRealFastHook(t, stack)
}`,
			want: []string{"3: testenv.ScenarioDependencyNotReady"},
		},
		{
			name: "ordinary writes are not controller state",
			src: `package p
func f() {
	_ = env.Client.Update(ctx, app)
	argo.UpdateApplication(t, "app", annotate)
	w.SetResourcesFilter(x)
}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "snippet_test.go", tt.src, parser.ParseComments)
			require.NoError(t, err)
			var got []string
			for _, s := range uncommentedWrites(fset, []*ast.File{f}) {
				got = append(got, fmt.Sprintf("%d: %s", s.pos.Line, s.call))
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// uncommentedWrites returns the writes of a controller's state in the files of one package that carry no marker:
// the direct writes (stateWriters, testenvWriters, status subresource writes) and the calls of the package's own
// functions that make such writes, however indirectly.
func uncommentedWrites(fset *token.FileSet, files []*ast.File) []site {
	pkgTestenv := len(files) > 0 && files[0].Name.Name == "testenv"
	direct := func(call *ast.CallExpr) (string, bool) {
		switch fn := call.Fun.(type) {
		case *ast.Ident:
			return fn.Name, stateWriters[fn.Name] || (pkgTestenv && testenvWriters[fn.Name])
		case *ast.SelectorExpr:
			name := fn.Sel.Name
			if x, ok := fn.X.(*ast.Ident); ok && x.Name == "testenv" && testenvWriters[name] {
				return "testenv." + name, true
			}
			if stateWriters[name] {
				return exprString(fn.X) + "." + name, true
			}
			if name == "Update" || name == "Patch" || name == "Apply" || name == "Create" {
				if sub, ok := statusWrite(fn.X); ok {
					return sub + "." + name, true
				}
			}
		}
		return "", false
	}

	// The package's own functions that write, directly or through each other.
	decls := map[string]*ast.FuncDecl{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				decls[fd.Name.Name] = fd
			}
		}
	}
	writers := map[string]bool{}
	calledName := func(call *ast.CallExpr) string {
		switch fn := call.Fun.(type) {
		case *ast.Ident:
			return fn.Name
		case *ast.SelectorExpr:
			if _, pkg := fn.X.(*ast.Ident); pkg && decls[fn.Sel.Name] != nil && decls[fn.Sel.Name].Recv == nil {
				return "" // pkg.F of another package
			}
			return fn.Sel.Name
		}
		return ""
	}
	for changed := true; changed; {
		changed = false
		for name, fd := range decls {
			if writers[name] {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || writers[name] {
					return !writers[name]
				}
				if _, ok := direct(call); ok || (calledName(call) != name && writers[calledName(call)]) {
					writers[name], changed = true, true
				}
				return true
			})
		}
	}

	var out []site
	for _, f := range files {
		docs := map[*ast.CommentGroup]bool{} // a function's doc comment covers that function only
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Doc != nil {
				docs[fd.Doc] = true
			}
		}
		markers := map[int]bool{} // lines of the file carrying the marker
		for _, cg := range f.Comments {
			if docs[cg] {
				continue
			}
			for _, c := range cg.List {
				if strings.Contains(c.Text, handWrittenMarker) {
					markers[fset.Position(c.Slash).Line] = true
				}
			}
		}
		for _, d := range f.Decls {
			fd, isFunc := d.(*ast.FuncDecl)
			documented := isFunc && fd.Doc != nil && strings.Contains(fd.Doc.Text(), handWrittenMarker)
			ast.Inspect(d, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				what, ok := direct(call)
				if !ok {
					if name := calledName(call); writers[name] && !(isFunc && fd.Name.Name == name) {
						what, ok = exprString(call.Fun), true
					}
				}
				if !ok || documented {
					return true
				}
				pos := fset.Position(call.Pos())
				for l := pos.Line - markerReach; l <= pos.Line; l++ {
					if markers[l] {
						return true
					}
				}
				out = append(out, site{pos: pos, call: what})
				return true
			})
		}
	}
	sortSites(out)
	return out
}

func sortSites(s []site) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].pos.Filename != s[j].pos.Filename {
			return s[i].pos.Filename < s[j].pos.Filename
		}
		return s[i].pos.Offset < s[j].pos.Offset
	})
}

// statusWrite reports whether x is Status() or SubResource("status") — the receiver of a status subresource write.
func statusWrite(x ast.Expr) (string, bool) {
	call, ok := x.(*ast.CallExpr)
	if !ok {
		return "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	switch {
	case sel.Sel.Name == "Status" && len(call.Args) == 0:
		return "Status()", true
	case sel.Sel.Name == "SubResource" && len(call.Args) == 1:
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Value == `"status"` {
			return `SubResource("status")`, true
		}
	}
	return "", false
}

// exprString renders the short expressions the detector names (a.b.c); anything else as "…".
func exprString(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.CallExpr:
		return exprString(x.Fun) + "()"
	}
	return "…"
}

// moduleRoot is the directory of the go.mod above the test's working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}
