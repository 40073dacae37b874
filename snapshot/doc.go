// Package snapshot reads `kubectl get -o yaml|json` and `argocd app get -o json` dumps and builds the observations
// the rules need, so `syncmedic scan --snapshot` shares one code path with the live daemon.
package snapshot
