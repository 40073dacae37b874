package syncmedic_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// realNodeCall is how a test asks for the machine's one real node (internal/testenv).
var realNodeCall = regexp.MustCompile(`\bRealNode(WhileUsed)?\(`)

// `make test` hands `go test` the packages hack/test-packages.sh prints: every package of ./... exactly once, the real
// node's longest user (internal/conformance/argo) first, and the other packages that use the node after all those
// that do not, so that no slot of `go test` waits for the node while the other slot holds it.
func TestMakeTestRunsEveryPackageInTheNodeOrder(t *testing.T) {
	out, err := exec.Command("bash", "hack/test-packages.sh").Output()
	require.NoError(t, err)
	order := strings.Fields(string(out))

	list, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}} {{join .TestGoFiles \" \"}} {{join .XTestGoFiles \" \"}}", "./...").Output()
	require.NoError(t, err)
	var all []string
	usesNode := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		f := strings.Fields(line)
		all = append(all, f[0])
		for _, file := range f[2:] {
			src, err := os.ReadFile(filepath.Join(f[1], file))
			require.NoError(t, err)
			if realNodeCall.Match(src) {
				usesNode[f[0]] = true
			}
		}
	}
	require.ElementsMatch(t, all, order, "every package of ./... once")
	require.Equal(t, "github.com/syncmedic/syncmedic/internal/conformance/argo", order[0])
	require.True(t, usesNode[order[0]], "internal/conformance/argo uses the real node")
	require.GreaterOrEqual(t, len(usesNode), 3, "the node packages are found: %v", usesNode)
	lastWithout := -1
	for i, p := range order {
		if !usesNode[p] {
			lastWithout = i
		}
	}
	for i, p := range order[1:] {
		if usesNode[p] {
			require.Greater(t, i+1, lastWithout, "%s uses the node and runs before %s, which does not", p, order[lastWithout])
		}
	}

	makefile, err := os.ReadFile("Makefile")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^test:\n(\t.*\n)*\t.*\./hack/test-suite\.sh\n`, string(makefile), "make test runs hack/test-suite.sh")
	suite, err := os.ReadFile("hack/test-suite.sh")
	require.NoError(t, err)
	require.Contains(t, string(suite), "pkgs=$(./hack/test-packages.sh) ||")
	require.Regexp(t, `go test -exec "\$testexec" -count=1 -timeout 60m -ldflags='-s -w' \$pkgs \|\|`, string(suite))
}
