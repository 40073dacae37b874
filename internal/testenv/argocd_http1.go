package testenv

import (
	"bytes"
	"net"
	"sync"
	"time"
)

// http1Guard wraps argocd-server's listener to get around a panic of its shutdown. argocd-server serves gRPC-web
// (HTTP/1.1) by handing each request to its gRPC server's ServeHTTP, and on shutdown it calls GracefulStop, which
// panics ("Drain() is not implemented", grpc-go's handler transport) if such a request is still being served. A
// test that just ended a gRPC-web Watch can stop the server while argocd-server is still returning from it. So
// before the server is stopped, drain closes every connection that is not HTTP/2 and waits until argocd-server's
// HTTP server has closed it too, which it does only after the request's handler returned.
type http1Guard struct {
	net.Listener
	mu    sync.Mutex
	conns map[*guardedConn]struct{}
}

func newHTTP1Guard(l net.Listener) *http1Guard {
	return &http1Guard{Listener: l, conns: map[*guardedConn]struct{}{}}
}

func (g *http1Guard) Accept() (net.Conn, error) {
	c, err := g.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &guardedConn{Conn: c, closed: make(chan struct{}), guard: g}
	g.mu.Lock()
	g.conns[gc] = struct{}{}
	g.mu.Unlock()
	return gc, nil
}

// drain closes the connections that are not HTTP/2 (gRPC) and waits, up to timeout, until the server closed them.
func (g *http1Guard) drain(timeout time.Duration) {
	g.mu.Lock()
	var open []*guardedConn
	for c := range g.conns {
		if !c.isHTTP2() {
			open = append(open, c)
		}
	}
	g.mu.Unlock()
	deadline := time.After(timeout)
	for _, c := range open {
		_ = c.Conn.Close() // the socket only: the server's own Close of the guardedConn marks it closed
		select {
		case <-c.closed:
		case <-deadline:
			return
		}
	}
}

// h2Preface starts every HTTP/2 connection (gRPC without TLS, as the tests use).
var h2Preface = []byte("PRI * HTTP/2.0")

type guardedConn struct {
	net.Conn
	guard  *http1Guard
	mu     sync.Mutex
	head   []byte
	once   sync.Once
	closed chan struct{}
}

func (c *guardedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	if len(c.head) < len(h2Preface) {
		c.head = append(c.head, p[:min(n, len(h2Preface)-len(c.head))]...)
	}
	c.mu.Unlock()
	return n, err
}

func (c *guardedConn) isHTTP2() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.head) == len(h2Preface) && bytes.Equal(c.head, h2Preface)
}

func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		close(c.closed)
		c.guard.mu.Lock()
		delete(c.guard.conns, c)
		c.guard.mu.Unlock()
	})
	return err
}
