// Package ociimage assembles container images as OCI image layouts with go-containerregistry — one layer per image,
// entries sorted, times and owners fixed — so the same files give the same digest; it builds the syncmedic image
// (internal/imagebuild) and the real node's images (internal/testenv).
package ociimage
