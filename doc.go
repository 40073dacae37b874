// Package syncmedic owns the vocabulary shared by every source, rule and sink: the Finding a rule produces, the
// catalog of rules, the Report of a one-shot scan, and the Sink, Source and Remedier contracts. Nothing in it runs:
// the incident engine is in package incident, the remediation stage in package remedy, the policy in package policy.
package syncmedic
