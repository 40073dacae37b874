// Package silence owns silences, Alertmanager-style: matchers on an incident's rule, namespace, application or
// HelmRelease and object name, a creator, a comment and a time window; the incident tracker keeps and applies them.
package silence
