package cmp

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/syncmedic/syncmedic/argocd/cmp/repofs"
)

// Bounds of the http(s) fetches kustomize makes once kustomize-allow-remote=true opts in. Kustomize's file loader
// fetches with a bare http.Client (http.DefaultTransport, no timeout, io.ReadAll of the whole body: kustomize
// api/internal/loader/fileloader.go httpClientGetContent) and takes no client from its caller, so the plugin bounds
// http.DefaultTransport itself (see boundRemoteFetches). Git bases are cloned by the git binary under kustomize's own
// clone timeout; the render deadline bounds both.
const (
	// MaxRemoteSize is the largest body one remote resource may have, the size cap of a file in the repository.
	MaxRemoteSize = repofs.MaxFileSize
	// maxRemoteTotal bounds the bodies of all the remote resources of one render together.
	maxRemoteTotal = 8 * MaxRemoteSize
	// remoteHeaderTimeout is how long a remote server may take to start answering.
	remoteHeaderTimeout = 15 * time.Second
)

// errRemoteTooLarge and errRemoteTotal explain a remote body over the limits.
var (
	errRemoteTooLarge = fmt.Errorf("is larger than the %d MiB limit of a remote kustomize resource", MaxRemoteSize>>20)
	errRemoteTotal    = fmt.Errorf("takes the remote kustomize resources of this render over their %d MiB limit together", maxRemoteTotal>>20)
)

// boundRemoteFetches puts boundedTransport in place of http.DefaultTransport, once per process: `cmp generate` is one
// process per render, and nothing else in it makes http requests. It is called only when a render opts in to remote
// resources.
var boundRemoteFetches = sync.OnceFunc(func() {
	http.DefaultTransport = newBoundedTransport()
})

// boundedTransport is an http.RoundTripper that refuses link-local, unspecified and multicast addresses (the cloud
// metadata services 169.254.169.254 and fd00:ec2::254 among them, which would hand the plugin's node credentials to
// whoever commits a kustomization), times out a server that does not answer, and cuts bodies at MaxRemoteSize each
// and maxRemoteTotal together.
type boundedTransport struct {
	next *http.Transport
	mu   sync.Mutex
	read int64 // bytes of remote bodies read so far
}

func newBoundedTransport() *boundedTransport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: refuseSpecialAddresses}
	return &boundedTransport{next: &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            dialer.DialContext,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  remoteHeaderTimeout,
		MaxResponseHeaderBytes: 64 << 10,
		ForceAttemptHTTP2:      true,
	}}
}

// refuseSpecialAddresses is the dialer's Control: it sees the address actually dialled, after DNS, so a name that
// resolves to a metadata address is refused too.
func refuseSpecialAddresses(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("remote kustomize resource: cannot parse the address %q: %w", address, err)
	}
	a := ap.Addr().Unmap()
	if a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() || a.IsMulticast() || a == awsMetadataV6 {
		return fmt.Errorf("remote kustomize resource: address %s is refused: link-local, unspecified and multicast addresses (the cloud metadata services among them) are never fetched", a)
	}
	return nil
}

// awsMetadataV6 is the IPv6 address of the EC2 instance metadata service, a unique-local address.
var awsMetadataV6 = netip.MustParseAddr("fd00:ec2::254")

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > MaxRemoteSize {
		resp.Body.Close()
		return nil, fmt.Errorf("%s %w (Content-Length %d)", req.URL.Redacted(), errRemoteTooLarge, resp.ContentLength)
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, t: t, url: req.URL.Redacted()}
	return resp, nil
}

// boundedBody fails a read that takes its body over MaxRemoteSize, or all bodies over maxRemoteTotal.
type boundedBody struct {
	io.ReadCloser
	t    *boundedTransport
	url  string
	read int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	b.t.mu.Lock()
	b.t.read += int64(n)
	total := b.t.read
	b.t.mu.Unlock()
	switch {
	case b.read > MaxRemoteSize:
		return 0, fmt.Errorf("%s %w", b.url, errRemoteTooLarge)
	case total > maxRemoteTotal:
		return 0, fmt.Errorf("%s %w", b.url, errRemoteTotal)
	}
	return n, err
}

// refuseRemoteHost resolves the host of a remote kustomize entry (an http(s) URL or a git repository in any form
// kustomize accepts) and refuses it when an address it resolves to is one boundedTransport refuses. An entry whose
// host cannot be found or resolved is left to kustomize, which fails on it with its own error.
func refuseRemoteHost(entry string) error {
	host := remoteHost(entry)
	if host == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if err := refuseSpecialAddresses("tcp", netip.AddrPortFrom(a, 0).String(), nil); err != nil {
			return err
		}
	}
	return nil
}

// remoteHost returns the host a remote kustomize entry names: scheme://[user@]host[:port]/…, git::…, gh:… (GitHub),
// github.com/…, user@host:path.
func remoteHost(entry string) string {
	e := strings.TrimPrefix(entry, "git::")
	if strings.HasPrefix(strings.ToLower(e), "gh:") || strings.HasPrefix(strings.ToLower(e), "github.com") {
		return "github.com"
	}
	if _, rest, ok := strings.Cut(e, "://"); ok {
		if u, err := url.Parse(e); err == nil && u.Hostname() != "" {
			return u.Hostname()
		}
		e = rest
	}
	if _, rest, ok := strings.Cut(e, "@"); ok {
		e = rest
	}
	host, _, _ := strings.Cut(e, ":")
	host, _, _ = strings.Cut(host, "/")
	return host
}
