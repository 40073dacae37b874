package imagebuild

import (
	"encoding/json"
	"go/version"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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

// args returns the arguments of every cmd instruction of s.
func (s stage) args(cmd string) []string {
	var all []string
	for _, in := range s.instructions {
		if in.cmd == cmd {
			all = append(all, in.args)
		}
	}
	return all
}

// copied maps each file a stage's COPY instructions put in the image to its source ("<stage>:<path>" for
// --from=<stage>, the build context's path otherwise).
func copied(t *testing.T, s stage) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range s.args("COPY") {
		fields := strings.Fields(a)
		from := ""
		if strings.HasPrefix(fields[0], "--from=") {
			from, fields = strings.TrimPrefix(fields[0], "--from=")+":", fields[1:]
		}
		require.GreaterOrEqual(t, len(fields), 2, "COPY %s", a)
		dest, srcs := fields[len(fields)-1], fields[:len(fields)-1]
		require.True(t, len(srcs) == 1 || strings.HasSuffix(dest, "/"), "COPY %s: several sources need a directory", a)
		for _, src := range srcs {
			file := dest
			if strings.HasSuffix(dest, "/") {
				file = dest + path.Base(src)
			}
			out[strings.TrimPrefix(file, "/")] = from + src
		}
	}
	return out
}

// pinned is an image reference with both a tag and a sha256 digest.
var pinned = regexp.MustCompile(`^[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$`)

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	require.NoError(t, err)
	return string(b)
}

// TestDockerfileBuildsTheFileTreeOfMakeImage: docker does not run here, so the Dockerfile is checked against what
// Build puts in the image: the same files from the same sources, the same user, entrypoint and labels, the binary
// built with the same flags on a pinned base.
func TestDockerfileBuildsTheFileTreeOfMakeImage(t *testing.T) {
	stages := parseDockerfile(t, readRepoFile(t, "Dockerfile"))
	require.Len(t, stages, 2, "a builder stage and the final image")
	builder, final := stages[0], stages[1]
	goDirective := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(readRepoFile(t, "go.mod"))
	require.NotNil(t, goDirective)

	cases := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"the build base is pinned by tag and digest", func(t *testing.T) {
			require.Regexp(t, pinned, builder.from)
		}},
		{"the builder's Go is the one go.mod asks for", func(t *testing.T) {
			m := regexp.MustCompile(`^golang:(\d+\.\d+\.\d+)-`).FindStringSubmatch(builder.from)
			require.NotNil(t, m, "builder %s", builder.from)
			require.GreaterOrEqual(t, version.Compare("go"+m[1], "go"+goDirective[1]), 0, "golang %s is older than go.mod's go %s", m[1], goDirective[1])
			require.Equal(t, version.Lang("go"+goDirective[1]), version.Lang("go"+m[1]), "the same Go release as go.mod")
		}},
		{"the binary is built as make image builds it", func(t *testing.T) {
			r := strings.Join(builder.args("RUN"), "\n")
			for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-buildvcs=false",
				`-ldflags "` + LDFlags(Stamp{Version: "${VERSION}"}) + `"`, "-o /out/syncmedic ./cmd/syncmedic"} {
				require.Contains(t, r, want)
			}
		}},
		{"the final image starts from scratch", func(t *testing.T) {
			require.Equal(t, "scratch", final.from)
		}},
		{"the final image holds Files, each from make image's source", func(t *testing.T) {
			want := map[string]string{
				BinaryPath:  "build:/out/syncmedic",
				CACertsPath: "build:" + DefaultCACertsFile,
				PasswdPath:  "internal/imagebuild/rootfs/" + PasswdPath,
				GroupPath:   "internal/imagebuild/rootfs/" + GroupPath,
			}
			require.ElementsMatch(t, Files(), keys(want), "the test's sources name every file of Files")
			require.Equal(t, want, copied(t, final))
		}},
		{"the final image runs syncmedic as 65532, labelled", func(t *testing.T) {
			require.Equal(t, []string{User}, final.args("USER"))
			entry := final.args("ENTRYPOINT")
			require.Len(t, entry, 1)
			var got []string
			require.NoError(t, json.Unmarshal([]byte(entry[0]), &got))
			require.Equal(t, Entrypoint(), got)
			require.Equal(t, []string{"org.opencontainers.image.source=" + SourceURL +
				" org.opencontainers.image.version=${VERSION} org.opencontainers.image.revision=${REVISION}"},
				normalizeSpaces(final.args("LABEL")))
			require.Empty(t, final.args("RUN"), "scratch has nothing to run")
		}},
		{"the build context has the sources but not the tools, the control-plane binaries and Git", func(t *testing.T) {
			ignored := strings.Fields(readRepoFile(t, ".dockerignore"))
			for _, want := range []string{".git", "bin", "tools"} {
				require.Contains(t, ignored, want)
			}
			require.NotContains(t, ignored, "internal")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, c.check)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func normalizeSpaces(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = strings.Join(strings.Fields(s), " ")
	}
	return out
}
