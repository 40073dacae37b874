package conformance

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// releaseVersion is a single release, as the rows of the scenarios that ran one name it ("v3.6.1").
var releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

// fluxVersion is a Flux controller's row version: "helm-controller v1.4.3", "kustomize-controller v1.7.3".
var fluxVersion = regexp.MustCompile(`^((?:helm|kustomize)-controller) (v\d+\.\d+\.\d+)$`)

// ranBinary returns the file name, under the tools' bin directory, of the controller binary a row says it ran, and
// the version that binary must report; ok is false for a row whose version is not one release of one binary (an
// upgrade "v0.37.2 → v1.4.3", a UI commit, a range).
func ranBinary(r Row) (file, version string, ok bool) {
	switch r.Tool {
	case "Argo CD":
		if releaseVersion.MatchString(r.Version) {
			return "argocd-" + r.Version, r.Version, true
		}
	case "Argo Workflows":
		if releaseVersion.MatchString(r.Version) {
			return "workflow-controller-" + r.Version, r.Version, true
		}
	case "Flux":
		if m := fluxVersion.FindStringSubmatch(r.Version); m != nil {
			return m[1] + "-" + m[2], m[2], true
		}
	}
	return "", "", false
}

// VerifyVersion checks that the controller binary in binDir a row says it ran reports, in its Go build information
// (the module version `go build` of MODULE@VERSION records), the version the row names: the matrix's version column
// is read from what ran, not only typed. A row whose version is not one release of one binary is not checked.
func VerifyVersion(r Row, binDir string) error {
	file, want, ok := ranBinary(r)
	if !ok {
		return nil
	}
	path := filepath.Join(binDir, file)
	got, err := moduleVersion(path)
	if err != nil {
		return fmt.Errorf("the row says %s %s ran: %w (make tools builds it)", r.Tool, r.Version, err)
	}
	if got != want {
		return fmt.Errorf("the row says %s %s, but %s reports module version %s", r.Tool, r.Version, path, got)
	}
	return nil
}

// moduleVersion is the main module's version in the Go build information of the binary at path.
func moduleVersion(path string) (string, error) {
	if _, err := os.Stat(path); err != nil {
		return "", err
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the build information of %s: %w", path, err)
	}
	return bi.Main.Version, nil
}
