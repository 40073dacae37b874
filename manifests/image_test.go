package manifests

import (
	"go/version"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// instruction is one Dockerfile instruction with its continuation lines joined.
type instruction struct {
	cmd  string // upper-case: FROM, RUN, COPY, …
	args string
}

// stage is one FROM of a multi-stage Dockerfile and the instructions after it.
type stage struct {
	from         string // the image reference
	instructions []instruction
}

// parseDockerfile splits the Dockerfile into stages; comments and blank lines are dropped.
func parseDockerfile(t *testing.T, text string) []stage {
	t.Helper()
	var stages []stage
	var pending string
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if pending == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			pending += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		full := pending + trimmed
		pending = ""
		cmd, args, _ := strings.Cut(full, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			ref := fields[0]
			if strings.HasPrefix(ref, "--platform=") {
				ref = fields[1]
			}
			stages = append(stages, stage{from: ref})
			continue
		}
		require.NotEmpty(t, stages, "%s before the first FROM", in.cmd)
		stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, in)
	}
	return stages
}

// pinned is an image reference with both a tag and a sha256 digest.
var pinned = regexp.MustCompile(`^[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$`)

func TestDockerfileBuildsAReproducibleNonRootImageOfTheBinaryOnly(t *testing.T) {
	stages := parseDockerfile(t, readFile(t, filepath.Join("..", "Dockerfile")))
	require.Len(t, stages, 2, "a builder stage and the final image")
	builder, final := stages[0], stages[1]
	run := func(s stage) string {
		var all []string
		for _, in := range s.instructions {
			if in.cmd == "RUN" {
				all = append(all, in.args)
			}
		}
		return strings.Join(all, "\n")
	}
	gomod := readFile(t, filepath.Join("..", "go.mod"))
	goDirective := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(gomod)
	require.NotNil(t, goDirective)

	cases := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"every base is pinned by tag and digest", func(t *testing.T) {
			for _, s := range stages {
				require.Regexp(t, pinned, s.from)
			}
		}},
		{"the builder's Go is the one go.mod asks for", func(t *testing.T) {
			m := regexp.MustCompile(`^golang:(\d+\.\d+\.\d+)-`).FindStringSubmatch(builder.from)
			require.NotNil(t, m, "builder %s", builder.from)
			require.GreaterOrEqual(t, version.Compare("go"+m[1], "go"+goDirective[1]), 0, "golang %s is older than go.mod's go %s", m[1], goDirective[1])
			require.Equal(t, version.Lang("go"+goDirective[1]), version.Lang("go"+m[1]), "the same Go release as go.mod")
		}},
		{"the binary is static, path-independent and stamped with the version", func(t *testing.T) {
			r := run(builder)
			for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-buildvcs=false", "-buildid=",
				"-X github.com/syncmedic/syncmedic.Version=${VERSION}", "./cmd/syncmedic"} {
				require.Contains(t, r, want)
			}
		}},
		{"the final image is distroless static, whose nonroot variant has no shell", func(t *testing.T) {
			require.True(t, strings.HasPrefix(final.from, "gcr.io/distroless/static-debian12:nonroot@"), final.from)
		}},
		{"the final image adds the binary only, runs as 65532 and starts syncmedic", func(t *testing.T) {
			var got []instruction
			got = append(got, final.instructions...)
			require.Equal(t, []instruction{
				{"COPY", "--from=build /out/syncmedic /usr/local/bin/syncmedic"},
				{"USER", "65532:65532"},
				{"ENTRYPOINT", `["/usr/local/bin/syncmedic"]`},
			}, got)
		}},
		{"the build context leaves out the tools, the control-plane binaries and Git", func(t *testing.T) {
			ignored := strings.Fields(readFile(t, filepath.Join("..", ".dockerignore")))
			for _, want := range []string{".git", "bin", "tools"} {
				require.Contains(t, ignored, want)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, c.check)
	}
}

// TestEveryInstallUsesTheSameImage: the kustomize base, the Argo CD CMP sidecar, the Helm chart's default and `make
// image`'s default all name one image, so building and pushing it once serves every install path.
func TestEveryInstallUsesTheSameImage(t *testing.T) {
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "Chart.yaml"))), &chart))
	var values struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "values.yaml"))), &values))
	want := values.Image.Repository + ":" + chart.AppVersion

	image := func(t *testing.T, objs []*unstructured.Unstructured, kind, name, container string) string {
		var d appsv1.Deployment
		convert(t, find(t, objs, kind, name), &d)
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == container {
				return c.Image
			}
		}
		t.Fatalf("no container %s in %s %s", container, kind, name)
		return ""
	}
	cases := []struct {
		name string
		got  func(t *testing.T) string
	}{
		{"the kustomize base", func(t *testing.T) string {
			return image(t, build(t, "base"), "Deployment", "syncmedic", "syncmedic")
		}},
		{"the Argo CD CMP sidecar", func(t *testing.T) string {
			var d unstructured.Unstructured
			d.Object = buildArgoCDWithComponent(t, "argocd")["Deployment/argocd-repo-server"].obj
			return image(t, []*unstructured.Unstructured{&d}, "Deployment", "argocd-repo-server", "syncmedic-cmp")
		}},
		{"the Helm chart rendered with its defaults", func(t *testing.T) string {
			return image(t, helmTemplate(t, "syncmedic", "syncmedic"), "Deployment", "syncmedic", "syncmedic")
		}},
		{"make image's default IMAGE", func(t *testing.T) string {
			m := regexp.MustCompile(`(?m)^IMAGE \?= (\S+)$`).FindStringSubmatch(readFile(t, filepath.Join("..", "Makefile")))
			require.NotNil(t, m, "no `IMAGE ?=` in the Makefile")
			return m[1]
		}},
	}
	for _, c := range cases {
		t.Run(c.name+" uses "+want, func(t *testing.T) {
			require.Equal(t, want, c.got(t))
		})
	}
}
