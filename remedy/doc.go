// Package remedy owns remediation: the stage that applies a remedy as the policy allows (rate limited, never twice
// at once on one object), and fixes on demand (Fixer). It reads and records incidents only through incident.Ledger.
package remedy
