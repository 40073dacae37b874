// Package syncmedic owns the domain shared by every source and sink: the Finding a rule produces, the catalog of
// rules, the Incident lifecycle built from findings, and the remediation Policy that decides what may be done.
package syncmedic
