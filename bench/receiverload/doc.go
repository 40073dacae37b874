// Command receiverload measures syncmedic's Flux event receiver against a bare net/http handler in the same run.
//
// Both listen on loopback. The receiver verifies the X-Signature of every event, decodes it, answers 202 and
// dispatches it into a real incident.Tracker (each event re-evaluates its HelmRelease with the Flux rules, as the
// watcher does on a trigger). The bare handler reads the body and answers 202. Both get the same signed events at
// the same concurrency for the same count, in alternating rounds; the last line is the throughput ratio.
package main
