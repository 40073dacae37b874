// Package notify delivers incidents to people and systems: Slack (one thread per incident), an outgoing signed
// webhook and Kubernetes Events, through per-destination queues with dedup and retry.
package notify
