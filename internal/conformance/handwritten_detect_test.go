package conformance

import (
	"go/ast"
	"go/token"
	"path"
	"sort"
	"strconv"
	"strings"
)

// handWrittenMarker is what a test says right above a write of a controller's state (issue 12): which state, and why
// no controller reaches it in that test.
const handWrittenMarker = "hand-written state:"

// markerReach is how many lines above a write its marker may be. A marker covers one write: the first one below it.
const markerReach = 6

// namedWriters are calls that write a controller's state by name, whatever their receiver: Argo CD's controller
// cache (the resource tree and managed resources in argocd-server's Redis, which no Kubernetes write shows) and
// client-go's UpdateStatus. Every other write is found by its shape (direct) or because the function called makes
// one (a writer).
var namedWriters = map[string]bool{
	"SetResourceTree":     true, // testenv.ArgoCDServer: Argo CD's cache
	"SetManagedResources": true,
	"SetResources":        true,
	"UpdateStatus":        true, // client-go typed and dynamic clients
	// Found through their bodies too; named so that a copy of the harness elsewhere is still caught.
	"SetOperationState":        true, // testenv.ArgoCDServer
	"ScenarioPreV2beta2Status": true, // fluxreal.Stack: a real release, its status then replaced by hand
}

// standIns are the harness's functions that play a component the test environment lacks, by "dir.Name": their own
// writes carry a marker, but calling them is not a hand-written state. The only one is the kubelet (the
// apiservers run no kubelet; docs/development.md, "What is real"): it moves a Pod to the phase the test decides, and the real
// kube-controller-manager and Argo CD controllers take it from there.
var standIns = map[string]bool{
	"internal/testenv.setPodPhase": true,
}

// writeVerbs are the client calls that write an object.
var writeVerbs = map[string]bool{"Update": true, "Patch": true, "Apply": true, "Create": true}

// site is one write of a controller's state found by the detector.
type site struct {
	pos  token.Position
	call string
}

func (s site) String() string { return s.pos.String() + ": " + s.call }

// goPackage is the parsed files of one directory.
type goPackage struct {
	dir   string // the import path's module-relative part, "." for the root
	files []*ast.File
}

// detector finds the writes of a controller's state in a set of packages: the direct ones (by shape) and the calls
// of the packages' own functions and methods that make one, however indirectly, also across packages.
type detector struct {
	fset   *token.FileSet
	module string
	pkgs   []*goPackage
	// funcs are the writing functions, by "dir.Name"; methods the writing methods, by name (a call's receiver type
	// is not known without type-checking, so a method counts whatever its receiver).
	funcs, methods map[string]bool
}

func newDetector(fset *token.FileSet, module string, pkgs []*goPackage) *detector {
	d := &detector{fset: fset, module: module, pkgs: pkgs, funcs: map[string]bool{}, methods: map[string]bool{}}
	d.findWriters()
	return d
}

// findWriters computes the functions and methods that write, directly or through each other, to a fixed point.
func (d *detector) findWriters() {
	for changed := true; changed; {
		changed = false
		for _, p := range d.pkgs {
			for _, f := range p.files {
				imports := importDirs(f, d.module)
				for _, decl := range f.Decls {
					fd, ok := decl.(*ast.FuncDecl)
					if !ok || fd.Body == nil {
						continue
					}
					key, set := p.dir+"."+fd.Name.Name, d.funcs
					if fd.Recv != nil {
						key, set = fd.Name.Name, d.methods
					}
					if set[key] || standIns[key] {
						continue
					}
					ast.Inspect(fd.Body, func(n ast.Node) bool {
						call, ok := n.(*ast.CallExpr)
						if !ok || set[key] {
							return !set[key]
						}
						if _, ok := d.write(call, fd, p.dir, imports); ok {
							set[key], changed = true, true
						}
						return true
					})
				}
			}
		}
	}
}

// sites returns every write in the packages that has no marker of its own.
func (d *detector) sites() []site {
	var out []site
	for _, p := range d.pkgs {
		for _, f := range p.files {
			out = append(out, d.fileSites(p.dir, f)...)
		}
	}
	sortSites(out)
	return out
}

// fileSites returns the writes of one file without a marker: each marker within markerReach lines above a write
// covers that one write (the first below it still uncovered).
func (d *detector) fileSites(dir string, f *ast.File) []site {
	imports := importDirs(f, d.module)
	var writes []site
	for _, decl := range f.Decls {
		fd, _ := decl.(*ast.FuncDecl)
		ast.Inspect(decl, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if what, ok := d.write(call, fd, dir, imports); ok {
					writes = append(writes, site{pos: d.fset.Position(call.Pos()), call: what})
				}
			}
			return true
		})
	}
	sortSites(writes)
	var markers []int // lines carrying the marker, in order
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if strings.Contains(c.Text, handWrittenMarker) {
				markers = append(markers, d.fset.Position(c.Slash).Line)
			}
		}
	}
	sort.Ints(markers)
	used := make([]bool, len(markers))
	var out []site
	for _, w := range writes {
		covered := false
		for i, l := range markers {
			if !used[i] && l >= w.pos.Line-markerReach && l <= w.pos.Line {
				used[i], covered = true, true
				break
			}
		}
		if !covered {
			out = append(out, w)
		}
	}
	return out
}

// write reports whether call writes a controller's state, and names it: a direct write (direct), or a call of a
// function or method of the scanned packages that writes (other than fd itself, calling itself).
func (d *detector) write(call *ast.CallExpr, fd *ast.FuncDecl, dir string, imports map[string]string) (string, bool) {
	if what, ok := direct(call, fd); ok {
		return what, true
	}
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		if d.funcs[dir+"."+fn.Name] && !(fd != nil && fd.Recv == nil && fd.Name.Name == fn.Name) {
			return fn.Name, true
		}
	case *ast.SelectorExpr:
		if x, ok := fn.X.(*ast.Ident); ok && imports[x.Name] != "" {
			return x.Name + "." + fn.Sel.Name, d.funcs[imports[x.Name]+"."+fn.Sel.Name]
		}
		if d.methods[fn.Sel.Name] && !(fd != nil && fd.Recv != nil && fd.Name.Name == fn.Sel.Name) {
			return exprString(fn), true
		}
	}
	return "", false
}

// direct reports whether call itself writes a controller's state: a named writer; a write through the status
// subresource (Status(), SubResource("status"), a trailing "status" subresource argument, REST's
// .SubResource("status") after Put, Post or Patch); a patch whose data touches status (a JSON patch of /status/...,
// a merge patch with a "status" key); a write of an object whose status the function set (typed .Status, or
// unstructured ["status"] / SetNested…(…, "status")); any Update of an Argo CD Application, whose CRD has no
// status subresource, so an Update writes the status it carries; or any Patch of one through Argo CD's clientset.
func direct(call *ast.CallExpr, fd *ast.FuncDecl) (string, bool) {
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		return fn.Name, namedWriters[fn.Name]
	case *ast.SelectorExpr:
		name := fn.Sel.Name
		if namedWriters[name] {
			return exprString(fn), true
		}
		if name == "SubResource" && len(call.Args) == 1 && isStatusLit(call.Args[0]) && chainHas(fn.X, "Put", "Post", "Patch") {
			return exprString(fn) + `("status")`, true
		}
		if !writeVerbs[name] {
			return "", false
		}
		if sub, ok := statusWrite(fn.X); ok {
			return sub + "." + name, true
		}
		if len(call.Args) > 0 && isStatusLit(call.Args[len(call.Args)-1]) {
			return exprString(fn) + `(…, "status")`, true
		}
		if name != "Create" && chainHas(fn.X, "Applications") {
			// Argo CD's clientset is the application-controller's way to write an Application: a patch or update
			// through it plays the controller (a user edits through argocd-server or kubectl).
			return exprString(fn) + " of an Application", true
		}
		if fd == nil {
			return "", false // outside a function: nothing to look back at
		}
		if name == "Patch" && touchesStatus(call.Args, fd) {
			return exprString(fn) + " of status", true
		}
		if statusSetBefore(call, fd) {
			return exprString(fn) + " of an object whose status was set", true
		}
		if name == "Update" && updatesApplication(fn, call, fd) {
			return exprString(fn) + " of an Application", true
		}
	}
	return "", false
}

func isStatusLit(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING && (lit.Value == `"status"` || lit.Value == "`status`")
}

// chainHas reports whether the call chain x (a.B().C(…).D) calls one of names.
func chainHas(x ast.Expr, names ...string) bool {
	for {
		switch e := x.(type) {
		case *ast.CallExpr:
			if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
				for _, n := range names {
					if sel.Sel.Name == n {
						return true
					}
				}
			}
			x = e.Fun
		case *ast.SelectorExpr:
			x = e.X
		case *ast.ParenExpr:
			x = e.X
		default:
			return false
		}
	}
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
	case sel.Sel.Name == "SubResource" && len(call.Args) == 1 && isStatusLit(call.Args[0]):
		return `SubResource("status")`, true
	}
	return "", false
}

// touchesStatus reports whether the patch data among args — literals, and what the function assigned to the
// variables they name — touches status: a JSON patch path /status..., a "status" key of JSON text or of a map.
func touchesStatus(args []ast.Expr, scope ast.Node) bool {
	found := false
	seen := map[string]bool{}
	var visit func(n ast.Node)
	visit = func(n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			if found {
				return false
			}
			switch e := n.(type) {
			case *ast.BasicLit:
				if e.Kind == token.STRING {
					v, err := strconv.Unquote(e.Value)
					if err != nil {
						v = e.Value
					}
					if strings.Contains(v, `"/status`) || strings.Contains(v, `"status"`) || strings.Contains(v, `\"status\"`) {
						found = true
					}
				}
			case *ast.KeyValueExpr:
				if isStatusLit(e.Key) {
					found = true
				}
			case *ast.Ident:
				if !seen[e.Name] {
					seen[e.Name] = true
					for _, rhs := range assignedTo(scope, e.Name) {
						visit(rhs)
					}
				}
			}
			return true
		})
	}
	for _, a := range args {
		visit(a)
	}
	return found
}

// assignedTo returns what scope assigns to the variable name (:=, =, var).
func assignedTo(scope ast.Node, name string) []ast.Expr {
	var out []ast.Expr
	ast.Inspect(scope, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			for i, l := range s.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name == name {
					if len(s.Rhs) == len(s.Lhs) {
						out = append(out, s.Rhs[i])
					} else if len(s.Rhs) == 1 {
						out = append(out, s.Rhs[0])
					}
				}
			}
		case *ast.ValueSpec:
			for i, id := range s.Names {
				if id.Name == name && i < len(s.Values) {
					out = append(out, s.Values[i])
				}
			}
		}
		return true
	})
	return out
}

// objectArgs returns the variable call passes as its object (x, &x, x.DeepCopy()): the second argument of a client
// call (after the context), the only one of a call with one argument.
func objectArgs(call *ast.CallExpr) []string {
	args := call.Args
	switch {
	case len(args) >= 2:
		args = args[1:2]
	case len(args) == 0:
		return nil
	}
	var out []string
	for _, a := range args {
		if u, ok := a.(*ast.UnaryExpr); ok && u.Op == token.AND {
			a = u.X
		}
		if c, ok := a.(*ast.CallExpr); ok && len(c.Args) == 0 {
			if s, ok := c.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(s.Sel.Name, "DeepCopy") {
				a = s.X
			}
		}
		if id, ok := a.(*ast.Ident); ok {
			out = append(out, id.Name)
		}
	}
	return out
}

// rootIdent is the variable an expression starts from: x of x.Status.Phase, x.Object["status"], &x.Status.
func rootIdent(e ast.Expr) (*ast.Ident, []string) {
	var path []string
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return x, path
		case *ast.SelectorExpr:
			path = append([]string{x.Sel.Name}, path...)
			e = x.X
		case *ast.IndexExpr:
			if lit, ok := x.Index.(*ast.BasicLit); ok {
				v, _ := strconv.Unquote(lit.Value)
				path = append([]string{v}, path...)
			}
			e = x.X
		case *ast.UnaryExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		default:
			return nil, nil
		}
	}
}

// setsStatus reports whether path (from rootIdent) reaches the object's status: .Status… or .Object["status"]….
func setsStatus(path []string) bool {
	return len(path) > 0 && path[0] == "Status" || len(path) > 1 && path[0] == "Object" && path[1] == "status"
}

// statusSetBefore reports whether the function set the status of an object call writes, before the call: an
// assignment to x.Status… or x.Object["status"]…, &x.Status… passed to a call, SetNested…(x.Object, v, "status", …),
// or x built from a composite literal with a Status field.
func statusSetBefore(call *ast.CallExpr, scope ast.Node) bool {
	objs := map[string]bool{}
	for _, name := range objectArgs(call) {
		objs[name] = true
	}
	if len(objs) == 0 {
		return false
	}
	found := false
	ast.Inspect(scope, func(n ast.Node) bool {
		if found || n == nil || n.Pos() >= call.Pos() {
			return false // only what comes before the call
		}
		switch s := n.(type) {
		case *ast.AssignStmt:
			for i, l := range s.Lhs {
				if id, path := rootIdent(l); id != nil && objs[id.Name] && setsStatus(path) {
					found = true
				}
				if id, ok := l.(*ast.Ident); ok && objs[id.Name] && i < len(s.Rhs) && literalWithStatus(s.Rhs[i]) {
					found = true
				}
			}
		case *ast.IncDecStmt:
			if id, path := rootIdent(s.X); id != nil && objs[id.Name] && setsStatus(path) {
				found = true
			}
		case *ast.ValueSpec:
			for i, id := range s.Names {
				if objs[id.Name] && i < len(s.Values) && literalWithStatus(s.Values[i]) {
					found = true
				}
			}
		case *ast.CallExpr:
			if sel, ok := s.Fun.(*ast.SelectorExpr); ok && s != call && (namedWriters[sel.Sel.Name] && sel.Sel.Name == "UpdateStatus" ||
				writeVerbs[sel.Sel.Name] && isStatusSubresource(sel.X)) {
				for _, name := range objectArgs(s) {
					found = found || objs[name] // written through the status subresource before: its status is set
				}
			}
			for i, a := range s.Args {
				u, ok := a.(*ast.UnaryExpr)
				if ok && u.Op == token.AND {
					if id, path := rootIdent(u.X); id != nil && objs[id.Name] && setsStatus(path) {
						found = true
					}
				}
				if i == 0 && len(s.Args) > 2 && isStatusLit(s.Args[2]) {
					if sel, ok := s.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "SetNested") {
						if id, _ := rootIdent(a); id != nil && objs[id.Name] {
							found = true
						}
					}
				}
			}
		}
		return true
	})
	return found
}

func isStatusSubresource(x ast.Expr) bool {
	_, ok := statusWrite(x)
	return ok
}

// literalWithStatus reports whether e is a composite literal (or its address) with a Status field.
func literalWithStatus(e ast.Expr) bool {
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		e = u.X
	}
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return false
	}
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Status" {
				return true
			}
		}
	}
	return false
}

// updatesApplication reports whether the Update call fn writes an Argo CD Application: through the clientset
// (….Applications(ns).Update), through a dynamic client on the applications resource, or with an object the function
// declares as an Application.
func updatesApplication(fn *ast.SelectorExpr, call *ast.CallExpr, scope ast.Node) bool {
	if chainHas(fn.X, "Applications") {
		return true
	}
	if res := resourceArg(fn.X); res != nil && touchesApplications(res, scope) {
		return true
	}
	for _, name := range objectArgs(call) {
		if declaredApplication(scope, name) {
			return true
		}
	}
	return false
}

// resourceArg returns the argument of a .Resource(x) call in the chain x, or nil.
func resourceArg(x ast.Expr) ast.Expr {
	for {
		switch e := x.(type) {
		case *ast.CallExpr:
			if s, ok := e.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Resource" && len(e.Args) == 1 {
				return e.Args[0]
			}
			x = e.Fun
		case *ast.SelectorExpr:
			x = e.X
		default:
			return nil
		}
	}
}

// touchesApplications reports whether e is, or is assigned from, something naming the "applications" resource.
func touchesApplications(e ast.Expr, scope ast.Node) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.BasicLit:
			found = found || x.Value == `"applications"`
		case *ast.Ident:
			for _, rhs := range assignedTo(scope, x.Name) {
				ast.Inspect(rhs, func(n ast.Node) bool {
					if l, ok := n.(*ast.BasicLit); ok && l.Value == `"applications"` {
						found = true
					}
					return true
				})
			}
			found = found || strings.Contains(strings.ToLower(x.Name), "appgvr") || strings.Contains(strings.ToLower(x.Name), "applicationgvr")
		}
		return !found
	})
	return found
}

// declaredApplication reports whether scope declares name as an Application: a parameter or var of type
// (*)….Application, or an assignment from a composite literal of that type.
func declaredApplication(scope ast.Node, name string) bool {
	found := false
	ast.Inspect(scope, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.Field:
			for _, id := range s.Names {
				found = found || id.Name == name && isApplicationType(s.Type)
			}
		case *ast.ValueSpec:
			for _, id := range s.Names {
				found = found || id.Name == name && s.Type != nil && isApplicationType(s.Type)
			}
		}
		return !found
	})
	if found {
		return true
	}
	for _, rhs := range assignedTo(scope, name) {
		if u, ok := rhs.(*ast.UnaryExpr); ok && u.Op == token.AND {
			rhs = u.X
		}
		if lit, ok := rhs.(*ast.CompositeLit); ok && isApplicationType(lit.Type) {
			return true
		}
	}
	return false
}

func isApplicationType(t ast.Expr) bool {
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.SelectorExpr:
		return x.Sel.Name == "Application"
	case *ast.Ident:
		return x.Name == "Application"
	}
	return false
}

// importDirs maps a file's import names to the module-relative directories of the module's own packages.
func importDirs(f *ast.File, module string) map[string]string {
	out := map[string]string{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p != module && !strings.HasPrefix(p, module+"/") {
			continue
		}
		dir := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		if dir == "" {
			dir = "."
		}
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		out[name] = dir
	}
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
