// Package silence owns silences, Alertmanager-style: matchers on an incident's rule, its object's namespace, kind and
// name, and the Argo CD Application or Flux HelmRelease that owns it (name, namespace, project), a creator, a comment
// and a time window, with the bounds a silence must keep; the incident tracker keeps and applies them.
package silence
