// Package notify delivers incident transitions to people and systems through a Dispatcher: one bounded queue and
// worker per destination, retry with backoff that honours Retry-After, and order kept per incident. The integrations
// are subpackages: slack (one thread per incident), webhook (signed JSON) and kubeevents (Kubernetes Events).
package notify
