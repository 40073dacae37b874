// Package incident owns the Incident lifecycle: the Tracker turns findings into incidents (open, update, resolve),
// persists them through a Store, keeps the outbox of notifications, follows leadership, and signals changes. The
// remediation stage reads incidents and records attempts only through the Ledger interface.
package incident
