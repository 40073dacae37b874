// Package argo holds the real-controller conformance tests for Argo CD: each hook scenario is produced by the real
// application-controller, repo-server and argocd-server of each tested version (testenv.ArgoCDStack) with the real
// Job, TTL and garbage-collector controllers, and `syncmedic serve` runs against it end to end (Slack test server):
// stuck states are announced with their rule and, where the policy says auto, the remedy unblocks the real
// controller; healthy near misses produce nothing. Every test records its row of docs/compat.md.
package argo
