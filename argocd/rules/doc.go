// Package rules owns the Argo CD rules of the failure catalog and what they read: the observations of an
// Application and an ApplicationSet with the thresholds, the hook helpers, the sync-window and retry verdicts, the
// evidence and remedy proposals of each finding, and the version advisories. Each rule is a pure function of an
// observation and the time; the package must not import the Argo CD client (argocd), argocd/remedy or gRPC.
package rules
