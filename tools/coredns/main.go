// Command coredns is CoreDNS with only the plugins the real node's Corefile uses (internal/testenv/node_dns.go):
// the default build links every plugin, cloud SDKs included, and takes many times as long to compile.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

// directives are the plugins in the order CoreDNS's plugin.cfg chains them.
var directives = []string{"ready", "health", "errors", "loadbalance", "cache", "template", "kubernetes", "loop"}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
