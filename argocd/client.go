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
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient"
	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	versionpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/version"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
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
	closers []io.Closer
}

var (
	_ ApplicationClient = application.ApplicationServiceClient(nil)
	_ VersionClient     = versionpkg.VersionServiceClient(nil)
	_ Client            = (*APIClient)(nil)
	_ AccountClient     = (*APIClient)(nil)
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
	// TokenFile holds the API token; when empty the token comes from ARGOCD_AUTH_TOKEN.
	TokenFile string
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

// Dial connects to the Argo CD server described by o. The token is read from o.TokenFile (trimmed), else from
// ARGOCD_AUTH_TOKEN; it never appears in errors.
func Dial(o ClientOptions) (*APIClient, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	token := os.Getenv(apiclient.EnvArgoCDAuthToken)
	if o.TokenFile != "" {
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading --argocd-token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return nil, fmt.Errorf("--argocd-token-file %s is empty", o.TokenFile)
		}
	}
	ua := o.UserAgent
	if ua == "" {
		ua = "syncmedic"
	}
	c, err := apiclient.NewClient(&apiclient.ClientOptions{
		ServerAddr: o.ServerAddr, AuthToken: token, PlainText: o.PlainText, Insecure: o.Insecure, CertFile: o.CAFile,
		GRPCWeb: o.GRPCWeb, GRPCWebRootPath: o.GRPCWebRootPath, UserAgent: ua,
		// No ConfigPath: never pick up the argocd CLI's local config of whoever runs syncmedic.
	})
	if err != nil {
		return nil, fmt.Errorf("argocd client for %s: %s", o.ServerAddr, redact(err.Error(), token))
	}
	api, err := FromAPIClient(c)
	if err != nil {
		return nil, explainTLS(o, err)
	}
	return api, nil
}

// probeTimeout bounds DialContext's first call to argocd-server.
const probeTimeout = 10 * time.Second

// DialContext is Dial that gives up when ctx ends. Argo CD's client dials without a context and, against a server
// that accepts connections but does not answer gRPC, waits until it does; so DialContext first asks the server's
// Version over a connection of its own, bounded by ctx and probeTimeout, and dials only once that answers (a
// gRPC-web tunnel is not probed). A connection Dial makes after ctx ended is closed.
func DialContext(ctx context.Context, o ClientOptions) (*APIClient, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if !o.GRPCWeb && o.GRPCWebRootPath == "" {
		if err := probe(ctx, o); err != nil {
			return nil, err
		}
	}
	type result struct {
		c   *APIClient
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := Dial(o)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.c != nil {
				_ = r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// probe calls the Version API of o's server once.
func probe(ctx context.Context, o ClientOptions) error {
	creds := insecure.NewCredentials()
	if !o.PlainText {
		cfg := &tls.Config{InsecureSkipVerify: o.Insecure} //nolint:gosec // --argocd-insecure asks for exactly this
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return fmt.Errorf("--argocd-ca-file: %w", err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			pool.AppendCertsFromPEM(pem)
			cfg.RootCAs = pool
		}
		creds = credentials.NewTLS(cfg)
	}
	addr := o.ServerAddr
	if !strings.Contains(addr, ":") {
		addr += ":443" // as Argo CD's client assumes
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
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
		return explainTLS(o, fmt.Errorf("argocd-server %s: %w", o.ServerAddr, err))
	}
	return nil
}

// explainTLS names the flag to fix when err is a TLS mismatch: a certificate this client does not trust (argocd-server's
// default certificate is self-signed), or a plaintext server (argocd-server --insecure) reached with TLS.
func explainTLS(o ClientOptions, err error) error {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	msg := err.Error()
	switch {
	case errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) || strings.Contains(msg, "x509: "):
		return fmt.Errorf("argocd-server %s presented a certificate this client does not trust: give --argocd-ca-file "+
			"with the CA that signed it (argocd-server's default certificate is self-signed: its own tls.crt is the CA), "+
			"or --argocd-insecure to skip verification: %w", o.ServerAddr, err)
	case !o.PlainText && strings.Contains(msg, "first record does not look like a TLS handshake"):
		return fmt.Errorf("argocd-server %s does not speak TLS (it runs with --insecure): give --argocd-plaintext: %w", o.ServerAddr, err)
	case !o.PlainText && strings.Contains(msg, "authentication handshake failed") &&
		(strings.Contains(msg, "connection reset by peer") || strings.Contains(msg, "EOF")):
		// A plaintext argocd-server (--insecure) hangs up on a TLS ClientHello instead of answering it.
		return fmt.Errorf("argocd-server %s hung up during the TLS handshake: if it runs with --insecure (plaintext), "+
			"give --argocd-plaintext: %w", o.ServerAddr, err)
	}
	return err
}

// FromAPIClient opens the application, version and account services of an apiclient.Client (as the argocd CLI
// builds it).
func FromAPIClient(c apiclient.Client) (*APIClient, error) {
	appCloser, apps, err := c.NewApplicationClient()
	if err != nil {
		return nil, fmt.Errorf("argocd application client: %w", err)
	}
	verCloser, ver, err := c.NewVersionClient()
	if err != nil {
		_ = appCloser.Close()
		return nil, fmt.Errorf("argocd version client: %w", err)
	}
	accCloser, acc, err := c.NewAccountClient()
	if err != nil {
		_, _ = appCloser.Close(), verCloser.Close()
		return nil, fmt.Errorf("argocd account client: %w", err)
	}
	return &APIClient{ApplicationServiceClient: apps, VersionServiceClient: ver, AccountClient: acc,
		closers: []io.Closer{appCloser, verCloser, accCloser}}, nil
}

// redact removes secret from s.
func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

type grpcCallOption = grpc.CallOption
