// Package policy owns the remediation policy: per rule, whether syncmedic ignores, notifies or acts (modes, scope,
// rate limits, who may fix on demand), and where an incident's notifications go (routes).
package policy
