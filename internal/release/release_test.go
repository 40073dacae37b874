package release

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"debug/macho"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/imagebuild"
	"github.com/syncmedic/syncmedic/internal/ociimage"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

const (
	version = "v0.1.0"
	commit  = "0123456789abcdef0123456789abcdef01234567"
)

var date = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// The platform `make test` builds syncmedic for (the image tests build it with the same flags, so its compile is
// cached); the others cost a cold compile of every dependency each (about 7 minutes on 2 busy cores, measured for
// darwin/arm64), beyond the budget of a `make test`.
const built = "linux/amd64"

// TestMakeRelease builds a release as `make release VERSION=v0.1.0` does, with syncmedic itself built for
// linux/amd64 and, for the other three targets, a stand-in binary (an empty main package built for that platform
// with the same flags: the release's naming, image index, SBOM, provenance and checksums are the same code for every
// target); go list checks that syncmedic's packages build for those platforms (every import resolves, no package
// excluded by its build constraints). `make release` builds all four for real.
func TestMakeRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the syncmedic binary and the chart: not a -short test")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	bin, err := testenv.BinDir()
	require.NoError(t, err)
	standin := filepath.Join(t.TempDir(), "main.go")
	require.NoError(t, os.WriteFile(standin, []byte("package main\n\nfunc main() {}\n"), 0o644))
	out := filepath.Join(t.TempDir(), "dist")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	digest, err := Build(ctx, Options{Version: version, Commit: commit, Date: date, ModuleRoot: root, Out: out,
		Helm: filepath.Join(bin, "helm"), SBOMTool: filepath.Join(bin, "cyclonedx-gomod"),
		GoBuild: func(ctx context.Context, goos, goarch string, s imagebuild.Stamp, dst string) error {
			if goos+"/"+goarch == built {
				return imagebuild.GoBuild(ctx, root, goos, goarch, s, dst)
			}
			cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", imagebuild.LDFlags(s), "-o", dst, standin)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("stand-in for %s/%s: %v\n%s", goos, goarch, err, b)
			}
			return nil
		}})
	require.NoError(t, err)

	t.Run("dist holds exactly the release's artifacts", func(t *testing.T) {
		want := []string{ChecksumsFile, ChartArchive(version), ImageArchive(version), ImageLayoutDir(version), ProvenanceFile}
		for _, p := range DefaultTargets() {
			want = append(want, BinaryName(version, p), SBOMName(version, p))
		}
		for _, v := range Variants() {
			want = append(want, v.File)
		}
		require.ElementsMatch(t, want, entries(t, out))
		require.Equal(t, "syncmedic-0.1.0.tgz", ChartArchive(version))
		require.Equal(t, "syncmedic_v0.1.0_darwin_arm64", BinaryName(version, "darwin/arm64"))
	})
	t.Run("sha256sum -c checksums.txt passes for every file of dist", func(t *testing.T) {
		cmd := exec.Command("sha256sum", "--strict", "-c", ChecksumsFile)
		cmd.Dir = out
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", b)
		var checked []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			name, ok := strings.CutSuffix(line, ": OK")
			require.True(t, ok, line)
			checked = append(checked, name)
		}
		var files []string
		for _, e := range entries(t, out) {
			if e != ChecksumsFile && e != ImageLayoutDir(version) {
				files = append(files, e)
			}
		}
		require.ElementsMatch(t, files, checked)
	})
	t.Run("each binary is a static executable for its platform", func(t *testing.T) {
		for _, p := range DefaultTargets() {
			path := filepath.Join(out, BinaryName(version, p))
			goos, goarch, _ := strings.Cut(p, "/")
			switch goos {
			case "linux":
				f, err := elf.Open(path)
				require.NoError(t, err, p)
				require.Equal(t, map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch], f.Machine, p)
				for _, prog := range f.Progs {
					require.NotEqual(t, elf.PT_INTERP, prog.Type, "%s: dynamically linked", p)
				}
				f.Close()
			case "darwin":
				f, err := macho.Open(path)
				require.NoError(t, err, p)
				require.Equal(t, map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch], f.Cpu, p)
				f.Close()
			}
		}
	})
	t.Run("the linux/amd64 binary prints the release's version, commit and date", func(t *testing.T) {
		if runtime.GOOS+"/"+runtime.GOARCH != built {
			t.Skipf("runs a %s binary", built)
		}
		want := "syncmedic v0.1.0 (" + runtime.Version() + ", linux/amd64)\ncommit: " + commit + "\nbuilt: 2026-11-29T10:00:00Z\n"
		for _, args := range [][]string{{"version"}, {"--version"}} {
			b, err := exec.Command(filepath.Join(out, BinaryName(version, built)), args...).CombinedOutput()
			require.NoError(t, err, "%s", b)
			require.Equal(t, want, string(b), "%v", args)
		}
	})
	t.Run("syncmedic's packages build for the other targets (go list)", func(t *testing.T) {
		for _, p := range DefaultTargets() {
			if p == built {
				continue
			}
			goos, goarch, _ := strings.Cut(p, "/")
			cmd := exec.Command("go", "list", "-e", "-deps", "-f", "{{if or .Error .DepsErrors .Incomplete}}{{.ImportPath}}: {{.Error}} {{.DepsErrors}}{{end}}", "./cmd/syncmedic")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
			b, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s: %s", p, b)
			require.Empty(t, strings.TrimSpace(string(b)), "%s", p)
		}
	})
	t.Run("the image index holds linux/amd64 and linux/arm64, and its binary reports the release", func(t *testing.T) {
		top, err := layout.ImageIndexFromPath(filepath.Join(out, ImageLayoutDir(version)))
		require.NoError(t, err)
		m, err := top.IndexManifest()
		require.NoError(t, err)
		require.Len(t, m.Manifests, 1)
		require.Equal(t, digest, m.Manifests[0].Digest.String())
		require.Equal(t, version, m.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
		index, err := top.ImageIndex(m.Manifests[0].Digest)
		require.NoError(t, err)
		im, err := index.IndexManifest()
		require.NoError(t, err)
		var platforms []string
		for _, d := range im.Manifests {
			platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		}
		require.Equal(t, []string{"linux/amd64", "linux/arm64"}, platforms)

		archive, err := os.ReadFile(filepath.Join(out, ImageArchive(version)))
		require.NoError(t, err)
		var builtBinary []byte // the image's binary for the platform built for real
		for _, p := range DefaultImagePlatforms() {
			goos, goarch, _ := strings.Cut(p, "/")
			files, _, err := ociimage.ReadLayer(archive, goos, goarch)
			require.NoError(t, err, p)
			released, err := os.ReadFile(filepath.Join(out, BinaryName(version, p)))
			require.NoError(t, err)
			inImage, err := ociimage.FileData(files, imagebuild.BinaryPath)
			require.NoError(t, err, p)
			require.True(t, bytes.Equal(released, inImage), "%s: the image's binary is not the released one", p)
			if p == built {
				builtBinary = inImage
			}
		}
		if runtime.GOOS+"/"+runtime.GOARCH != built {
			t.Skipf("runs a %s binary", built)
		}
		require.NotNil(t, builtBinary, "the image holds %s", built)
		p := filepath.Join(t.TempDir(), "syncmedic")
		require.NoError(t, os.WriteFile(p, builtBinary, 0o755))
		b, err := exec.Command(p, "version").CombinedOutput()
		require.NoError(t, err, "%s", b)
		require.Equal(t, "syncmedic v0.1.0 ("+runtime.Version()+", linux/amd64)\ncommit: "+commit+"\nbuilt: 2026-11-29T10:00:00Z\n", string(b))
	})
	t.Run("the chart is version 0.1.0, appVersion v0.1.0, and renders the release's image", func(t *testing.T) {
		chart := filepath.Join(out, ChartArchive(version))
		b, err := exec.Command(filepath.Join(bin, "helm"), "show", "chart", chart).CombinedOutput()
		require.NoError(t, err, "%s", b)
		var c struct{ Name, Version, AppVersion string }
		require.NoError(t, yaml.Unmarshal(b, &c))
		require.Equal(t, struct{ Name, Version, AppVersion string }{"syncmedic", "0.1.0", "v0.1.0"}, c)
		b, err = exec.Command(filepath.Join(bin, "helm"), "template", "syncmedic", chart, "-n", "syncmedic").CombinedOutput()
		require.NoError(t, err, "%s", b)
		require.Equal(t, []string{"Deployment/syncmedic: " + ImageRepository + ":v0.1.0"}, images(t, b))
	})
	t.Run("every install names the release's image", func(t *testing.T) {
		want := map[string][]string{
			"install.yaml":                  {"Deployment/syncmedic: " + ImageRepository + ":v0.1.0"},
			"install-without-flux.yaml":     {"Deployment/syncmedic: " + ImageRepository + ":v0.1.0"},
			"install-monitoring.yaml":       {"Deployment/syncmedic: " + ImageRepository + ":v0.1.0"},
			"install-workflows-remedy.yaml": {"Deployment/syncmedic: " + ImageRepository + ":v0.1.0"},
			"install-flux-alert.yaml":       nil,
		}
		got := map[string][]string{}
		for _, v := range Variants() {
			b, err := os.ReadFile(filepath.Join(out, v.File))
			require.NoError(t, err)
			got[v.File] = images(t, b)
		}
		require.Equal(t, want, got)
	})
	t.Run("each SBOM is CycloneDX for its binary, naming the modules linked in", func(t *testing.T) {
		for _, p := range DefaultTargets() {
			b, err := os.ReadFile(filepath.Join(out, SBOMName(version, p)))
			require.NoError(t, err)
			var bom struct {
				BOMFormat string `json:"bomFormat"`
				Metadata  struct {
					Timestamp string `json:"timestamp"`
					Component struct{ Name, Version string }
				}
				Components []struct{ Name, Version string }
			}
			require.NoError(t, json.Unmarshal(b, &bom), p)
			require.Equal(t, "CycloneDX", bom.BOMFormat, p)
			require.Equal(t, version, bom.Metadata.Component.Version, p)
			require.Empty(t, bom.Metadata.Timestamp, "%s: a timestamp makes the SBOM differ between two builds", p)
			if p != built {
				continue
			}
			require.Equal(t, "github.com/syncmedic/syncmedic", bom.Metadata.Component.Name)
			var names []string
			for _, c := range bom.Components {
				names = append(names, c.Name)
			}
			require.Contains(t, names, "k8s.io/client-go")
			require.Contains(t, names, "github.com/argoproj/argo-cd/v2")
		}
	})
	t.Run("provenance.txt is go version -m of every binary", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(out, ProvenanceFile))
		require.NoError(t, err)
		var heads []string
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if !strings.HasPrefix(sc.Text(), "\t") {
				heads = append(heads, sc.Text())
			}
		}
		var want []string
		for _, p := range DefaultTargets() {
			want = append(want, BinaryName(version, p)+": "+runtime.Version())
		}
		require.Equal(t, want, heads)
		require.Contains(t, string(b), "\tpath\tgithub.com/syncmedic/syncmedic/cmd/syncmedic\n")
		// -trimpath leaves -ldflags out of the build information: the stamp is what `syncmedic version` prints.
		for _, p := range DefaultTargets() {
			goos, goarch, _ := strings.Cut(p, "/")
			for _, setting := range []string{"-trimpath=true", "CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch} {
				require.Contains(t, section(string(b), BinaryName(version, p)), "\tbuild\t"+setting+"\n", p)
			}
		}
	})
}

// TestBuildRefusesABadVersionBeforeBuilding: the version must be a release version, named in the error with the fix.
func TestBuildRefusesABadVersionBeforeBuilding(t *testing.T) {
	for _, v := range []string{"", "0.1.0", "v0.1", "latest", "v0.1.0+meta"} {
		t.Run(v, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "dist")
			_, err := Build(context.Background(), Options{Version: v, ModuleRoot: t.TempDir(), Out: out, Helm: "helm", SBOMTool: "cyclonedx-gomod", Date: date})
			require.EqualError(t, err, `release: version "`+v+`" is not a release version: want v<major>.<minor>.<patch>, e.g. make release VERSION=v0.1.0`)
			require.NoDirExists(t, out)
		})
	}
}

// section returns the lines of `go version -m` output about the binary name.
func section(out, name string) string {
	_, rest, ok := strings.Cut(out, name+": ")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\nsyncmedic_"); i >= 0 {
		rest = rest[:i+1]
	}
	return rest
}

// TestBuildRefusesAMissingToolBeforeBuilding: a missing helm or cyclonedx-gomod is named with the make target that
// builds it.
func TestBuildRefusesAMissingToolBeforeBuilding(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	exe := filepath.Join(t.TempDir(), "tool")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	cases := []struct {
		name, helm, sbom, want string
	}{
		{"helm", missing, exe, `release: exec: "` + missing + `": stat ` + missing + `: no such file or directory: build it with make tools-helm`},
		{"cyclonedx-gomod", exe, missing, `release: exec: "` + missing + `": stat ` + missing + `: no such file or directory: build it with make tools-sbom`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "dist")
			_, err := Build(context.Background(), Options{Version: version, ModuleRoot: t.TempDir(), Out: out, Helm: c.helm, SBOMTool: c.sbom, Date: date})
			require.EqualError(t, err, c.want)
			require.NoDirExists(t, out)
		})
	}
}

// entries lists dir's names, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// images lists "Kind/name: image" for every container of every workload in a multi-document YAML stream.
func images(t *testing.T, stream []byte) []string {
	t.Helper()
	var out []string
	for _, doc := range strings.Split(string(stream), "\n---\n") {
		var o struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Template struct {
					Spec struct {
						InitContainers, Containers []struct{ Image string }
					}
				}
			}
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &o))
		for _, c := range append(o.Spec.Template.Spec.InitContainers, o.Spec.Template.Spec.Containers...) {
			out = append(out, o.Kind+"/"+o.Metadata.Name+": "+c.Image)
		}
	}
	return out
}
