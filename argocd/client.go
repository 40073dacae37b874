package argocd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	accountpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/account"
	versionpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/version"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/applicationset"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/secretfile"
)

// ApplicationClient is the part of Argo CD's ApplicationService syncmedic calls. The generated
// application.ApplicationServiceClient satisfies it.
type ApplicationClient interface {
	Watch(ctx context.Context, in *application.ApplicationQuery, opts ...grpc.CallOption) (application.ApplicationService_WatchClient, error)
	List(ctx context.Context, in *application.ApplicationQuery, opts ...grpc.CallOption) (*v1alpha1.ApplicationList, error)
	Get(ctx context.Context, in *application.ApplicationQuery, opts ...grpc.CallOption) (*v1alpha1.Application, error)
	ResourceTree(ctx context.Context, in *application.ResourcesQuery, opts ...grpc.CallOption) (*v1alpha1.ApplicationTree, error)
	GetResource(ctx context.Context, in *application.ApplicationResourceRequest, opts ...grpc.CallOption) (*application.ApplicationResourceResponse, error)
	PatchResource(ctx context.Context, in *application.ApplicationResourcePatchRequest, opts ...grpc.CallOption) (*application.ApplicationResourceResponse, error)
	TerminateOperation(ctx context.Context, in *application.OperationTerminateRequest, opts ...grpc.CallOption) (*application.OperationTerminateResponse, error)
	Sync(ctx context.Context, in *application.ApplicationSyncRequest, opts ...grpc.CallOption) (*v1alpha1.Application, error)
	GetApplicationSyncWindows(ctx context.Context, in *application.ApplicationSyncWindowsQuery, opts ...grpc.CallOption) (*application.ApplicationSyncWindowsResponse, error)
}

// VersionClient is the Version API; the generated version.VersionServiceClient satisfies it.
type VersionClient interface {
	Version(ctx context.Context, in *emptypb.Empty, opts ...grpc.CallOption) (*versionpkg.VersionMessage, error)
}

// Client is every Argo CD API call syncmedic makes: what the watcher and the remedies need, nothing more, so that
// a test or a later v3 client can stand in.
type Client interface {
	ApplicationClient
	VersionClient
}

// APIClient joins the generated Argo CD clients into a Client, and answers CanI (AccountClient) for the
// permission preflights.
type APIClient struct {
	application.ApplicationServiceClient
	versionpkg.VersionServiceClient
	AccountClient
	// appSets is the ApplicationSetService (its List and Get would clash with the ApplicationService's if embedded).
	appSets applicationset.ApplicationSetServiceClient
	// conn carries the calls whose replies are read as bytes (rawreply.go).
	conn    *grpc.ClientConn
	closers []io.Closer
}

// ListApplicationSets lists ApplicationSets through argocd-server (ApplicationSetService.List; the account needs
// `applicationsets, get`).
func (c *APIClient) ListApplicationSets(ctx context.Context, in *applicationset.ApplicationSetListQuery, opts ...grpc.CallOption) (*v1alpha1.ApplicationSetList, error) {
	return c.appSets.List(ctx, in, opts...)
}

var (
	_ ApplicationClient = application.ApplicationServiceClient(nil)
	_ VersionClient     = versionpkg.VersionServiceClient(nil)
	_ Client            = (*APIClient)(nil)
	_ AccountClient     = (*APIClient)(nil)
	_ AppSetClient      = (*APIClient)(nil)
)

// Close closes the gRPC connections.
func (c *APIClient) Close() error {
	var errs []error
	for _, cl := range c.closers {
		errs = append(errs, cl.Close())
	}
	return errors.Join(errs...)
}

// ClientOptions say how to reach an Argo CD server, like the argocd CLI's global flags.
type ClientOptions struct {
	// ServerAddr is host:port of argocd-server (":443" is assumed without a port, as the CLI does).
	ServerAddr string
	// TokenFile holds the API token; when empty the token comes from Token, else from ARGOCD_AUTH_TOKEN.
	TokenFile string
	// Token is the API token itself, as the argocd CLI's login configuration holds it; it never appears in errors.
	Token string
	// PlainText disables TLS; Insecure skips verifying the server certificate.
	PlainText, Insecure bool
	// CAFile holds the PEM certificate(s) that sign argocd-server's certificate (its default one is self-signed), in
	// addition to the system roots.
	CAFile string
	// GRPCWeb tunnels gRPC over HTTP/1.1 (for ingresses that do not pass HTTP/2); GRPCWebRootPath implies it.
	GRPCWeb         bool
	GRPCWebRootPath string
	// UserAgent defaults to "syncmedic".
	UserAgent string
}

// Validate checks the options before dialing, naming the flag to fix.
func (o ClientOptions) Validate() error {
	if strings.TrimSpace(o.ServerAddr) == "" {
		return errors.New("--argocd-server is empty: give the argocd-server address as host:port")
	}
	if o.PlainText && o.Insecure {
		return errors.New("--argocd-plaintext and --argocd-insecure exclude each other: plaintext has no certificate to skip")
	}
	if o.CAFile == "" {
		return nil
	}
	if o.PlainText || o.Insecure {
		return errors.New("--argocd-ca-file excludes --argocd-plaintext and --argocd-insecure: give the CA to verify the server, or skip verification, not both")
	}
	pem, err := os.ReadFile(o.CAFile)
	if err != nil {
		return fmt.Errorf("--argocd-ca-file: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return fmt.Errorf("--argocd-ca-file %s holds no PEM certificate", o.CAFile)
	}
	return nil
}

// Dial connects to the Argo CD server described by o: DialContext without a deadline of the caller's.
func Dial(o ClientOptions) (*APIClient, error) {
	return DialContext(context.Background(), o)
}

// probeTimeout bounds DialContext's first call to argocd-server.
const probeTimeout = 10 * time.Second

// DialContext connects to the Argo CD server described by o. It first asks the server's Version over a connection
// of its own, bounded by ctx and probeTimeout, so that an unreachable server, a TLS mismatch or a server that
// accepts connections but does not answer gRPC is an error here that names the flag to fix, not a hang or a raw
// error on the first call (a gRPC-web tunnel is not probed: its errors come with each call). The token is read from
// o.TokenFile (trimmed), else from o.Token, else from ARGOCD_AUTH_TOKEN; it never appears in errors.
func DialContext(ctx context.Context, o ClientOptions) (*APIClient, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	token, err := readToken(o)
	if err != nil {
		return nil, err
	}
	if !o.GRPCWeb && o.GRPCWebRootPath == "" {
		if err := probe(ctx, o); err != nil {
			return nil, err
		}
	}
	return dial(o, token)
}

// readToken reads o.TokenFile (trimmed), else o.Token, else ARGOCD_AUTH_TOKEN.
func readToken(o ClientOptions) (string, error) {
	if o.TokenFile == "" && o.Token != "" {
		return o.Token, nil
	}
	if o.TokenFile == "" {
		return os.Getenv(EnvAuthToken), nil
	}
	b, err := os.ReadFile(o.TokenFile)
	if err != nil {
		return "", fmt.Errorf("reading --argocd-token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("--argocd-token-file %s is empty", o.TokenFile)
	}
	return token, nil
}

// dial opens the connection (grpc.NewClient: no I/O until the first call).
func dial(o ClientOptions, token string) (*APIClient, error) {
	ua := o.UserAgent
	if ua == "" {
		ua = "syncmedic"
	}
	// What Argo CD's own client (pkg/apiclient, newConn) sets on every connection: the token as the "token"
	// metadata and 200 MB messages. syncmedic dials itself instead of importing pkg/apiclient, which imports every
	// service of the API and their types. Like Argo CD's client, it makes no transparent retries (pkg/apiclient
	// configures grpc_retry interceptors, but its OpenTelemetry interceptors, set after them, replace them: a
	// connection holds one interceptor of each kind): the watcher re-lists after an interrupted stream, and a remedy
	// that failed is retried after the policy's backoff, never repeated by the transport.
	opts := []grpc.DialOption{
		grpc.WithPerRPCCredentials(perRPCToken(o, token)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize), grpc.MaxCallSendMsgSize(maxMessageSize)),
		grpc.WithUserAgent(ua),
	}
	target := serverAddr(o.ServerAddr)
	var closers []io.Closer
	if o.GRPCWeb || o.GRPCWebRootPath != "" {
		tunnel, err := startGRPCWebTunnel(o)
		if err != nil {
			return nil, fmt.Errorf("argocd client for %s: gRPC-web tunnel: %w", o.ServerAddr, err)
		}
		closers = append(closers, tunnel)
		target = "unix://" + tunnel.socket
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		creds, err := transportCredentials(o)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(creds))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		for _, c := range closers {
			_ = c.Close()
		}
		return nil, fmt.Errorf("argocd client for %s: %s", o.ServerAddr, redact(err.Error(), token))
	}
	return &APIClient{
		ApplicationServiceClient: application.NewApplicationServiceClient(conn),
		VersionServiceClient:     versionpkg.NewVersionServiceClient(conn),
		AccountClient:            accountpkg.NewAccountServiceClient(conn),
		appSets:                  applicationset.NewApplicationSetServiceClient(conn),
		conn:                     conn,
		closers:                  append([]io.Closer{conn}, closers...),
	}, nil
}

// EnvAuthToken is the environment variable the token comes from without --argocd-token-file, as for the argocd CLI.
const EnvAuthToken = "ARGOCD_AUTH_TOKEN"

// maxMessageSize is the gRPC message limit Argo CD's client sets (ARGOCD_GRPC_MAX_SIZE_MB's default): an
// ApplicationList of a big instance is far over gRPC's 4 MB default.
const maxMessageSize = 200 * 1024 * 1024

// tokenCredentials sends the API token the way argocd-server reads it: the "token" metadata of every call.
type tokenCredentials string

func (t tokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"token": string(t)}, nil
}

// RequireTransportSecurity is false: --argocd-plaintext (argocd-server --insecure, usually behind a TLS ingress or a
// service mesh) sends the token too, as the argocd CLI does.
func (tokenCredentials) RequireTransportSecurity() bool { return false }

// fileToken sends the token of --argocd-token-file as the file holds it at each call: a Secret updated in place
// (the kubelet swaps its ..data symlink) takes effect at the next call, without a new connection.
type fileToken struct{ f *secretfile.File }

func (t fileToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"token": t.f.Value()}, nil
}

// RequireTransportSecurity is false, as for tokenCredentials.
func (fileToken) RequireTransportSecurity() bool { return false }

// perRPCToken is token read from o.TokenFile at each call when there is one, else token as it is.
func perRPCToken(o ClientOptions, token string) credentials.PerRPCCredentials {
	if o.TokenFile == "" || token == "" {
		return tokenCredentials(token)
	}
	f, err := secretfile.Open("--argocd-token-file", o.TokenFile)
	if err != nil { // gone since readToken read it: keep what it read
		return tokenCredentials(token)
	}
	return fileToken{f: f}
}

// serverAddr adds the port ":443" when addr has none, as Argo CD's client does.
func serverAddr(addr string) string {
	if !strings.Contains(addr, ":") {
		return addr + ":443"
	}
	return addr
}

// tlsConfig is the client TLS of o: the system roots plus --argocd-ca-file, or no verification with --argocd-insecure.
// The CA file is read again when it changes (a Secret updated in place): each handshake verifies the server's chain
// and name against the roots as the file holds them then, so a reconnect after argocd-server's certificate and the
// CA were rotated succeeds without a restart.
func tlsConfig(o ClientOptions) (*tls.Config, error) {
	cfg := &tls.Config{InsecureSkipVerify: o.Insecure} //nolint:gosec // --argocd-insecure asks for exactly this
	if o.CAFile != "" {
		roots, err := newCARoots(o.CAFile)
		if err != nil {
			return nil, err
		}
		// Verification moves from the handshake's default to VerifyConnection, which does the same with the roots
		// of the moment (crypto/tls documents this pattern).
		cfg.InsecureSkipVerify = true //nolint:gosec // verified in VerifyConnection
		cfg.VerifyConnection = roots.verify
	}
	return cfg, nil
}

// caRoots are the system roots plus the certificates of a CA file, read again when the file changes.
type caRoots struct {
	path string

	mu   sync.Mutex
	info os.FileInfo
	pool *x509.CertPool
}

// newCARoots reads path once: an unreadable file is an error naming --argocd-ca-file.
func newCARoots(path string) (*caRoots, error) {
	r := &caRoots{path: path}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--argocd-ca-file: %w", err)
	}
	pool, err := r.read()
	if err != nil {
		return nil, err
	}
	r.info, r.pool = info, pool
	return r, nil
}

func (r *caRoots) read() (*x509.CertPool, error) {
	pem, err := os.ReadFile(r.path)
	if err != nil {
		return nil, fmt.Errorf("--argocd-ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--argocd-ca-file %s holds no PEM certificate", r.path)
	}
	return pool, nil
}

// current returns the roots as the file holds them now; while it cannot be read (the moment of a Secret's swap),
// the last good ones.
func (r *caRoots) current() *x509.CertPool {
	r.mu.Lock()
	defer r.mu.Unlock()
	info, err := os.Stat(r.path)
	if err != nil || (os.SameFile(r.info, info) && info.Size() == r.info.Size() && info.ModTime().Equal(r.info.ModTime())) {
		return r.pool
	}
	if pool, err := r.read(); err == nil {
		r.info, r.pool = info, pool
	}
	return r.pool
}

// verify checks the server's chain and name as the handshake's default verification does, with the current roots.
func (r *caRoots) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("x509: argocd-server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: r.current(), Intermediates: inter, DNSName: cs.ServerName})
	if err != nil {
		return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
	}
	return nil
}

// transportCredentials are TLS (tlsConfig) or, with --argocd-plaintext, none.
func transportCredentials(o ClientOptions) (credentials.TransportCredentials, error) {
	if o.PlainText {
		return insecure.NewCredentials(), nil
	}
	cfg, err := tlsConfig(o)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// probe calls the Version API of o's server once.
func probe(ctx context.Context, o ClientOptions) error {
	creds, err := transportCredentials(o)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(serverAddr(o.ServerAddr), grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("argocd-server %s: %w", o.ServerAddr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if _, err := versionpkg.NewVersionServiceClient(conn).Version(ctx, &emptypb.Empty{}); err != nil {
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unavailable && st.Code() != codes.DeadlineExceeded {
			return nil // it answered, if only to refuse
		}
		err = explainTLS(o, fmt.Errorf("argocd-server %s: %w", o.ServerAddr, err))
		if answersGRPCWeb(ctx, o) {
			// What the argocd CLI detects too (and then switches to gRPC-web with a warning): a proxy or ingress in
			// front of argocd-server that passes HTTP/1.1 but not HTTP/2. A daemon says so instead of switching.
			return syncmedic.Permanent(fmt.Errorf("argocd-server %s answers gRPC-web but not gRPC (a proxy or ingress in front of it that does "+
				"not pass HTTP/2?): give --argocd-grpc-web: %w", o.ServerAddr, err))
		}
		return err
	}
	return nil
}

// answersGRPCWeb reports whether o's server answers the Version API over gRPC-web (bounded by probeTimeout, not by
// the gRPC probe's deadline, which may be spent).
func answersGRPCWeb(ctx context.Context, o ClientOptions) bool {
	if ctx.Err() != nil {
		return false
	}
	o.GRPCWeb = true
	c, err := dial(o, "")
	if err != nil {
		return false
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	_, err = c.VersionServiceClient.Version(ctx, &emptypb.Empty{}) // argocd-server answers it without a token
	return err == nil
}

// explainTLS names the flag to fix when err is a TLS mismatch, marked permanent (waiting does not cure it; serve's
// /readyz holds a new pod back on it): a certificate this client does not trust (argocd-server's
// default certificate is self-signed), or a plaintext server (argocd-server --insecure) reached with TLS.
func explainTLS(o ClientOptions, err error) error {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	msg := err.Error()
	switch {
	case errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) || strings.Contains(msg, "x509: "):
		return syncmedic.Permanent(fmt.Errorf("argocd-server %s presented a certificate this client does not trust: give --argocd-ca-file "+
			"with the CA that signed it (argocd-server's default certificate is self-signed: its own tls.crt is the CA), "+
			"or --argocd-insecure to skip verification: %w", o.ServerAddr, err))
	case !o.PlainText && strings.Contains(msg, "first record does not look like a TLS handshake"):
		return syncmedic.Permanent(fmt.Errorf("argocd-server %s does not speak TLS (it runs with --insecure): give --argocd-plaintext: %w", o.ServerAddr, err))
	case !o.PlainText && strings.Contains(msg, "authentication handshake failed") &&
		(strings.Contains(msg, "connection reset by peer") || strings.Contains(msg, "EOF")):
		// A plaintext argocd-server (--insecure) hangs up on a TLS ClientHello instead of answering it.
		return fmt.Errorf("argocd-server %s hung up during the TLS handshake: if it runs with --insecure (plaintext), "+
			"give --argocd-plaintext: %w", o.ServerAddr, err)
	}
	return err
}

// redact removes secret from s.
func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

type grpcCallOption = grpc.CallOption
