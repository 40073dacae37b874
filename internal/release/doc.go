// Package release builds a syncmedic release into one directory (`make release`): the static binaries for linux and
// darwin, the multi-arch OCI image, the packaged chart, the rendered kustomize installs, the SBOM, the provenance and
// the checksums of them all.
package release
