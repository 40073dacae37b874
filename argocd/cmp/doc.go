// Package cmp is the Argo CD Config Management Plugin behind `syncmedic cmp generate`: it renders an app directory
// (plain YAML/JSON, kustomize or a Helm chart) the way Argo CD would, lints the rendered objects for the hook and
// webhook hazards of the failure catalog, and passes the manifests through unchanged unless an opt-in fix applies.
package cmp
