//go:build tools

// Package tools pins cyclonedx-gomod, which hack/sbom-tools.sh builds into bin/cyclonedx-gomod for the release's
// SBOM (`make release`, internal/release).
package tools

import _ "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
