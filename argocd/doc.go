// Package argocd owns syncmedic's connection to Argo CD: the API client (gRPC and gRPC-web, its errors, the
// preflight that asks CanI), the application watch and its per-app loop, the ApplicationSet poller, the live hook
// reads and the scan. It builds the observations the rules in argocd/rules judge and hands their findings on; it
// writes nothing to Argo CD, and must not import argocd/remedy, the only package that does.
package argocd
