// Command watchscale measures syncmedic's Argo CD watcher against a client that only counts events.
//
// A child process serves Argo CD's generated ApplicationService over gRPC on loopback: Watch streams every
// application as ADDED (as argocd-server does) and then a burst of updates; List, ResourceTree, GetResource,
// Version and every other call are answered and counted. The parent consumes the stream twice per round through
// syncmedic's own client (argocd.Dial): once counting events only (the baseline), once with
// argocd.Watcher feeding a real tracker. CPU time is getrusage of the parent process, which runs nothing else.
package main
