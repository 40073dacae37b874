// Package imagebuild builds the syncmedic container image without a container engine: the static syncmedic binary,
// Debian's CA certificates and a passwd and group entry for the non-root user 65532, as a reproducible OCI image
// layout (internal/ociimage). `make image` runs it through hack/image; the Dockerfile builds the same file tree.
package imagebuild
