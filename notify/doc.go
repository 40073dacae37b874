// Package notify delivers incident transitions to people and systems through a Dispatcher: one bounded queue and
// worker per destination, a deadline on every attempt, retry with backoff that honours Retry-After and never gives
// up, and order kept per incident. The integrations are subpackages: slack (one thread per incident), webhook
// (signed JSON), kubeevents (Kubernetes Events) and alertmanager (Prometheus Alertmanager alerts).
package notify
