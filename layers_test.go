package syncmedic_test

import (
	"errors"
	"go/build"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/syncmedic/syncmedic"

// layer is a package's place in the dependency direction: a package imports only packages of lower layers, and of
// its own tree (notify/slack imports notify); sources may also build on each other (snapshot reads argocd, flux and
// kube findings).
type layer int

// layerSupport holds the helpers any package may use (generated upstream types, leader election, test
// environments); they import only each other.
const layerSupport layer = -1

const (
	layerVocabulary layer = iota // the root package: Finding, Rule, Report, Sink, Source
	layerPolicy                  // what syncmedic may do about a rule (the Argo CD preflight reads it), and silences
	layerSources                 // the sources and their rules
	layerIncident                // the incident engine
	layerActions                 // remediation and notification, each consuming the incident engine
	layerUI                      // the incident API and page
	layerTop                     // wiring and tools: commands, benchmarks, test-only packages
)

// layers places every package of the module, by its path below the module (longest prefix wins). A new package must
// be placed here, so that where it may depend is decided once.
func layers() map[string]layer {
	return map[string]layer{
		"":                     layerVocabulary,
		"policy":               layerPolicy,
		"silence":              layerPolicy,
		"argocd":               layerSources,
		"flux":                 layerSources,
		"kube":                 layerSources,
		"snapshot":             layerSources,
		"incident":             layerIncident,
		"remedy":               layerActions,
		"notify":               layerActions,
		"ui":                   layerUI,
		"cmd":                  layerTop,
		"bench":                layerTop,
		"manifests":            layerTop,
		"internal/conformance": layerTop,
		"internal/install":     layerTop,
		"internal/reliability": layerTop,
		"internal/argoapi":     layerSupport,
		"internal/leader":      layerSupport,
		"internal/synthdump":   layerSupport,
		"internal/testenv":     layerSupport,
		"internal/testclock":   layerSupport,
		"internal/argoapi/gen": layerTop,
		"internal/ociimage":    layerSupport,
		"internal/secretfile":  layerSupport,
		"internal/imagebuild":  layerSupport,
		"internal/release":     layerSupport,
		"internal/docgen":      layerSupport,
		"hack":                 layerTop,
	}
}

// place returns the layer of the package at rel (its path below the module): the longest prefix in layers.
func place(rel string) (layer, bool) {
	all := layers()
	best, found := "", rel == ""
	for p := range all {
		if p != "" && (rel == p || strings.HasPrefix(rel, p+"/")) && len(p) > len(best) {
			best, found = p, true
		}
	}
	return all[best], found
}

// modulePackages returns the non-test imports within the module of every package in it, by path below the module.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if dir != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && dir != "." {
			return filepath.SkipDir // a module of its own (tools/*), not a package of this one
		}
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			var none *build.NoGoError
			if errors.As(err, &none) {
				return nil // a directory of non-Go files
			}
			return err
		}
		rel := filepath.ToSlash(dir)
		if rel == "." {
			rel = ""
		}
		var own []string
		for _, imp := range p.Imports {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				own = append(own, strings.TrimPrefix(strings.TrimPrefix(imp, module), "/"))
			}
		}
		pkgs[rel] = own
		return nil
	})
	require.NoError(t, err)
	return pkgs
}

// family is the top directory of a package: a package may import its own tree.
func family(rel string) string {
	top, _, _ := strings.Cut(rel, "/")
	return top
}

// name is the import path of the package at rel, for messages.
func name(rel string) string {
	if rel == "" {
		return module
	}
	return rel
}

// TestDependenciesPointDownTheLayers checks the dependency direction vocabulary ← policy ← sources/rules ←
// incident ← remedy/notify ← ui ← cmd over every package's non-test imports (tests may wire anything together).
func TestDependenciesPointDownTheLayers(t *testing.T) {
	pkgs := modulePackages(t)
	for _, want := range []string{"", "policy", "incident", "remedy", "notify", "ui", "cmd/syncmedic", "argocd", "argocd/rules", "argocd/remedy", "flux"} {
		_, ok := pkgs[want]
		require.True(t, ok, "package %s is gone: update the layers of this test", name(want))
	}
	var bad []string
	for rel, imports := range pkgs {
		l, ok := place(rel)
		if !ok {
			bad = append(bad, name(rel)+" has no layer: place it in layers() (layers_test.go)")
			continue
		}
		for _, imp := range imports {
			m, ok := place(imp)
			switch {
			case !ok:
				bad = append(bad, name(imp)+" has no layer: place it in layers() (layers_test.go)")
			case l == layerSupport && m != layerSupport:
				bad = append(bad, name(rel)+" is a support package, so it may not import "+name(imp))
			case m == layerSupport || m < l || family(rel) == family(imp) || (m == l && l == layerSources):
			default:
				bad = append(bad, name(rel)+" imports "+name(imp)+", which is not below it")
			}
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "dependencies against the direction:\n%s", strings.Join(bad, "\n"))
}

// TestTheVocabularyRunsNothing checks that the root package stays the shared vocabulary: no incident engine, no
// metrics, no Kubernetes client, no package of this module.
func TestTheVocabularyRunsNothing(t *testing.T) {
	p, err := build.ImportDir(".", 0)
	require.NoError(t, err)
	for _, imp := range p.Imports {
		for _, banned := range []string{module + "/", "github.com/prometheus/", "k8s.io/client-go", "log/slog"} {
			require.False(t, strings.HasPrefix(imp, banned), "package syncmedic imports %s: the vocabulary runs nothing (move the code to incident, remedy or policy)", imp)
		}
	}
}

// deps returns every package the package at rel builds on, itself included, direct or not (`go list -deps`, tests
// left out).
func deps(t *testing.T, rel string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "./"+rel).Output()
	require.NoError(t, err, "go list -deps ./%s", rel)
	return strings.Fields(string(out))
}

// TestArgoCDPackagesPointOneWay checks the one direction inside argocd/: the rules (argocd/rules) are pure functions
// of an observation, so they build on no Argo CD client and no gRPC; the remedies (argocd/remedy) are the only
// writers, and neither the client and watch (argocd) nor the rules build on them. The check is transitive. gRPC is
// the package google.golang.org/grpc, which every connection, call option and generated service client imports; its
// error-code packages (codes, status), which the Application types carry, are no client.
func TestArgoCDPackagesPointOneWay(t *testing.T) {
	const argocd, rules, remedy = module + "/argocd", module + "/argocd/rules", module + "/argocd/remedy"
	noClient := map[string]string{
		argocd:                                   "the Argo CD client",
		remedy:                                   "the remedies",
		"google.golang.org/grpc":                 "gRPC",
		module + "/internal/argoapi/application": "the ApplicationService gRPC client",
		module + "/internal/argoapi/applicationset": "the ApplicationSetService gRPC client",
	}
	var bad []string
	for _, d := range deps(t, "argocd/rules") {
		if what, ok := noClient[d]; ok {
			bad = append(bad, "argocd/rules builds on "+d+" ("+what+"): the rules are pure functions of an observation; move what needs it to argocd or argocd/remedy")
		}
		if strings.HasPrefix(d, "github.com/argoproj/argo-cd/v2/pkg/apiclient") {
			bad = append(bad, "argocd/rules builds on "+d+" (an Argo CD API client): the rules are pure functions of an observation; move what needs it to argocd or argocd/remedy")
		}
	}
	for _, d := range deps(t, "argocd") {
		if d == remedy {
			bad = append(bad, "argocd builds on argocd/remedy: the client and watch sit below the remedies; move the definition it needs into argocd or argocd/rules")
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "imports against the direction argocd/rules ← argocd ← argocd/remedy:\n%s", strings.Join(bad, "\n"))
}
