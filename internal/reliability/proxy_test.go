package reliability

import (
	"io"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// tcpProxy forwards loopback TCP connections to target. Cut closes every open connection (a dropped network, an
// ingress or server restart); Down also refuses new connections until Up, the way an unreachable server does.
type tcpProxy struct {
	l       net.Listener
	target  string
	mu      sync.Mutex
	conns   []net.Conn
	down    bool
	cuts    int
	refused int
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{l: l, target: target}
	t.Cleanup(func() { _ = l.Close(); p.Cut() })
	go p.serve()
	return p
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
		go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
	}
}

// Addr is the proxy's address.
func (p *tcpProxy) Addr() string { return p.l.Addr().String() }

// Cut closes every connection open now.
func (p *tcpProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.cuts++
}

// Down cuts every connection and refuses new ones until Up.
func (p *tcpProxy) Down() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.Cut()
}

// Up accepts connections again.
func (p *tcpProxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// Refused counts the connections refused while down.
func (p *tcpProxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// Cuts counts the cuts so far.
func (p *tcpProxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}
