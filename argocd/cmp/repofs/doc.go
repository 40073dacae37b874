// Package repofs confines the plugin's file reads to the repository Argo CD's cmp-server unpacked: a path a
// parameter or a kustomization names is cleaned, its symbolic links resolved, and read only when it is a regular file
// inside the repository root and no larger than a cap.
package repofs
