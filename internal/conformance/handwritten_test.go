package conformance

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pendingElsewhere are the files other engineers were editing when this guard was written, with the number of
// writes in each still without a marker. The guard fails when a count no longer matches, so an entry is removed
// (or lowered) as soon as its markers are added and cannot hide a new write.
var pendingElsewhere = map[string]int{} // empty: every site in the module says why

// TestEveryHandWrittenControllerStateSaysWhy walks the module's test code — every *_test.go file, bench/,
// internal/testenv and any other file importing "testing" — and fails, naming file:line, on any write of a
// controller's state (an Application's status or operation state, Argo CD's controller cache, the status of a
// HelmRelease, a Job, a Workflow...), however it is made and through whichever helper, without a
// "// hand-written state:" comment of its own within 6 lines above it.
func TestEveryHandWrittenControllerStateSaysWhy(t *testing.T) {
	root := moduleRoot(t)
	module := modulePath(t, root)
	dirs := map[string][]string{} // package directory → the files to check
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
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
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		testCode := strings.HasSuffix(path, "_test.go") || strings.HasPrefix(rel, "bench/") ||
			strings.HasPrefix(rel, "internal/testenv/")
		if !testCode {
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				testCode = testCode || imp.Path.Value == `"testing"`
			}
		}
		if testCode {
			dir := filepath.ToSlash(filepath.Dir(rel))
			dirs[dir] = append(dirs[dir], path)
		}
		return nil
	})
	require.NoError(t, err)
	for _, dir := range []string{"argocd", "internal/testenv", "bench/announce", "internal/testenv/fluxreal"} {
		require.Contains(t, dirs, dir, "the walk reaches %s", dir)
	}

	fset := token.NewFileSet()
	var pkgs []*goPackage
	for dir, paths := range dirs {
		p := &goPackage{dir: dir}
		for _, path := range paths {
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			require.NoError(t, err)
			p.files = append(p.files, f)
		}
		pkgs = append(pkgs, p)
	}
	d := newDetector(fset, module, pkgs)
	require.True(t, d.funcs["internal/testenv.CreateCompletedJob"], "testenv's helpers that write status are found")
	require.True(t, d.methods["UpdateApplication"], "an Update of an Application writes its status")

	var missing []site
	perFile := map[string]int{}
	for _, s := range d.sites() {
		rel, _ := filepath.Rel(root, s.pos.Filename)
		s.pos.Filename = filepath.ToSlash(rel)
		if _, pending := pendingElsewhere[s.pos.Filename]; pending {
			perFile[s.pos.Filename]++
			continue
		}
		missing = append(missing, s)
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
	require.Failf(t, "writes of a controller's state without a reason", "%d writes of a controller's state by hand need a %q comment of their own saying which state and why no controller "+
		"reaches it in that test (naming the real-controller test that proves it, if one does), within %d lines above "+
		"the call:\n%s", len(missing), "// "+handWrittenMarker, markerReach, strings.Join(lines, "\n"))
}

// modulePath reads the module path from root's go.mod.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(m)
		}
	}
	require.Fail(t, "no module line in go.mod")
	return ""
}

// TestTheDetectorFindsStateWritesThatDoNotSayWhy: the cases marked "(issue 27)" are the shapes the detector before
// issue 27 missed (it read only *_test.go and bench/, took a function's doc comment or one marker for every write
// within 6 lines, and treated an Update of an Application as ordinary); each of them fails on that detector.
func TestTheDetectorFindsStateWritesThatDoNotSayWhy(t *testing.T) {
	// testenv is a stand-in for internal/testenv's non-test helpers, which the detector reads too.
	const testenv = `package testenv
// CreateCompletedJob creates a Job and writes its final status as the Job controller would.
func CreateCompletedJob(t testing.TB, env *Env, job *batchv1.Job) *batchv1.Job {
	require.NoError(t, env.Client.Create(ctx, job))
	job.Status.Succeeded = 1
	// hand-written state: the helper; its callers say why.
	require.NoError(t, env.Client.Status().Update(ctx, job))
	return job
}
// ScenarioHookFinalizerStuck writes through CreateCompletedJob.
func ScenarioHookFinalizerStuck(t testing.TB, env *Env, h HookJob) *batchv1.Job {
	// hand-written state: see CreateCompletedJob.
	return CreateCompletedJob(t, env, h.job())
}
// ScenarioRealFastHook only drives the real controllers.
func ScenarioRealFastHook(t testing.TB, s *Stack) { s.Sync(t) }
// UpdateApplication writes an Application back.
func (a *ArgoCDServer) UpdateApplication(t testing.TB, name string, mutate func(*v1alpha1.Application)) {
	var app v1alpha1.Application
	mutate(&app)
	// hand-written state: the helper; its callers say why.
	_ = a.Env.Client.Update(ctx, &app)
}`
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
			name: "one marker covers one write, not every write within 6 lines (issue 27)",
			src: `package p
func f() {
	// hand-written state: the tree.
	argo.SetResourceTree(t, "app", tree)
	argo.SetManagedResources(t, "app", diffs)
	// hand-written state: the operation.
	argo.SetOperationState(t, "app", op)
}`,
			want: []string{"5: argo.SetManagedResources"},
		},
		{
			name: "the enclosing function's doc comment no longer covers its writes (issue 27)",
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
	argo.SetResourceTree(t, "app", tree)
	argo.SetManagedResources(t, "app", diffs)
}`,
			want: []string{"11: argo.SetResourceTree", "12: argo.SetManagedResources"},
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
			name: "a dynamic or typed Patch or Update of the status subresource (issue 27)",
			src: `package p
func f() {
	_, _ = dyn.Resource(hrGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
	_, _ = dyn.Resource(hrGVR).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{}, "status")
	_, _ = dyn.Resource(hrGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
}`,
			want: []string{`3: dyn.Resource().Namespace().Patch(…, "status")`, `4: dyn.Resource().Namespace().Update(…, "status")`},
		},
		{
			name: "a JSON patch of /status/... or a merge patch with a status key (issue 27)",
			src: `package p
func f() {
	_, _ = apps.Patch(ctx, name, types.JSONPatchType, []byte(` + "`" + `[{"op":"replace","path":"/status/operationState/phase","value":"Running"}]` + "`" + `), opts)
	patch := []byte(` + "`" + `{"status":{"phase":"Failed"}}` + "`" + `)
	_ = c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
	data, _ := json.Marshal(map[string]any{"status": map[string]any{"observedGeneration": 3}})
	_, _ = dyn.Resource(gvr).Patch(ctx, name, types.MergePatchType, data, opts)
	_, _ = jobs.Patch(ctx, name, types.JSONPatchType, []byte(` + "`" + `[{"op":"remove","path":"/metadata/finalizers/0"}]` + "`" + `), opts)
}`,
			want: []string{"3: apps.Patch of status", "5: c.Patch of status", "7: dyn.Resource().Patch of status"},
		},
		{
			name: "an unstructured object whose status was set, then written (issue 27)",
			src: `package p
func f() {
	_, _ = dyn.Resource(gvr).Create(ctx, u, opts)
	u.Object["status"] = map[string]any{"phase": "Failed"}
	_, _ = dyn.Resource(gvr).Update(ctx, u, opts)
	_ = unstructured.SetNestedField(w.Object, "Failed", "status", "phase")
	_ = env.Client.Update(ctx, w)
	_ = env.Client.Update(ctx, other)
	_, err := ri.UpdateStatus(ctx, obj, opts)
	_, _ = ri.Update(ctx, obj, opts)
}`,
			want: []string{"5: dyn.Resource().Update of an object whose status was set", "7: env.Client.Update of an object whose status was set",
				"9: ri.UpdateStatus", "10: ri.Update of an object whose status was set"},
		},
		{
			name: "a typed object whose status was set, then updated (issue 27)",
			src: `package p
func f() {
	hr.Status.ObservedGeneration = 2
	_ = env.Client.Update(ctx, hr)
	apimeta.SetStatusCondition(&rel.Status.Conditions, cond)
	_ = env.Client.Patch(ctx, rel, client.MergeFrom(old))
}`,
			want: []string{"4: env.Client.Update of an object whose status was set", "6: env.Client.Patch of an object whose status was set"},
		},
		{
			name: "REST .SubResource(\"status\") after Put, Post or Patch (issue 27)",
			src: `package p
func f() {
	_ = rest.Put().Namespace(ns).Resource("helmreleases").Name(n).SubResource("status").Body(b).Do(ctx).Error()
	_ = rest.Get().Namespace(ns).Resource("helmreleases").Name(n).SubResource("status").Do(ctx).Error()
}`,
			want: []string{`3: rest.Put().Namespace().Resource().Name().SubResource("status")`},
		},
		{
			name: "any Update of an Argo CD Application, which has no status subresource, and any write through its clientset (issue 27)",
			src: `package p
func f(app *v1alpha1.Application) {
	_ = env.Client.Update(ctx, app)
	var other v1alpha1.Application
	_ = env.Client.Update(ctx, &other)
	built := &argoappv1.Application{ObjectMeta: meta}
	_ = env.Client.Update(ctx, built)
	_, _ = appClientset.ArgoprojV1alpha1().Applications(ns).Update(ctx, x, opts)
	_, _ = dyn.Resource(schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}).Namespace(ns).Update(ctx, u, opts)
	_, _ = apps.ArgoprojV1alpha1().Applications(ns).Patch(ctx, name, types.MergePatchType, clearRefresh, opts)
	_ = env.Client.Update(ctx, cm)
	_ = env.Client.Create(ctx, app2)
}`,
			want: []string{"3: env.Client.Update of an Application", "5: env.Client.Update of an Application",
				"7: env.Client.Update of an Application", "8: appClientset.ArgoprojV1alpha1().Applications().Update of an Application",
				"9: dyn.Resource().Namespace().Update of an Application",
				"10: apps.ArgoprojV1alpha1().Applications().Patch of an Application"},
		},
		{
			name: "testenv's helpers that write status, in its non-test files, and their callers (issue 27)",
			src: `package p
func f() {
	testenv.CreateCompletedJob(t, env, job)
	testenv.ScenarioHookFinalizerStuck(t, env, h)
	testenv.ScenarioRealFastHook(t, stack)
	argo.UpdateApplication(t, "app", annotate)
	// hand-written state: a refresh annotation, and the status read back with it.
	argo.UpdateApplication(t, "app", annotate)
}`,
			want: []string{"3: testenv.CreateCompletedJob", "4: testenv.ScenarioHookFinalizerStuck", "6: argo.UpdateApplication"},
		},
		{
			name: "a helper that writes makes each of its callers a site too",
			src: `package p
// setStatus writes status.
func setStatus() {
	// hand-written state: see the callers.
	_ = c.Status().Update(ctx, hr)
}
func g() {
	setStatus()
	// hand-written state: a stale v2beta1 status, which no helm-controller that downloads writes.
	setStatus()
}`,
			want: []string{"8: setStatus"},
		},
		{
			name: "testenv's hand-written scenarios count, the real-controller ones of the same name do not",
			src: `package p
func f() {
	testenv.ScenarioHookFinalizerStuck(t, env, h)
	stack.ScenarioHookFinalizerStuck(t, ns, repo)
}`,
			want: []string{"3: testenv.ScenarioHookFinalizerStuck"},
		},
		{
			name: "ordinary writes are not controller state",
			src: `package p
func f() {
	_ = env.Client.Update(ctx, cm)
	_ = env.Client.Patch(ctx, job, client.MergeFrom(old))
	w.SetResourcesFilter(x)
	_ = env.Client.Create(ctx, hr)
}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			env, err := parser.ParseFile(fset, "internal/testenv/helpers.go", testenv, parser.ParseComments)
			require.NoError(t, err)
			// The snippet imports testenv on a line of its own right after the package clause (hence Line-1 below).
			src := strings.Replace(tt.src, "package p\n", "package p\nimport \"example.com/m/internal/testenv\"\n", 1)
			f, err := parser.ParseFile(fset, "p/snippet_test.go", src, parser.ParseComments)
			require.NoError(t, err)
			d := newDetector(fset, "example.com/m", []*goPackage{{dir: "internal/testenv", files: []*ast.File{env}}, {dir: "p", files: []*ast.File{f}}})
			require.Empty(t, d.fileSites("internal/testenv", env), "the stand-in testenv says why at each write")
			var got []string
			for _, s := range d.fileSites("p", f) {
				got = append(got, fmt.Sprintf("%d: %s", s.pos.Line-1, s.call))
			}
			require.Equal(t, tt.want, got)
		})
	}
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
