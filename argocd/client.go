package argocd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient"
	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	versionpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/version"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"google.golang.org/grpc"
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
		ServerAddr: o.ServerAddr, AuthToken: token, PlainText: o.PlainText, Insecure: o.Insecure,
		GRPCWeb: o.GRPCWeb, GRPCWebRootPath: o.GRPCWebRootPath, UserAgent: ua,
		// No ConfigPath: never pick up the argocd CLI's local config of whoever runs syncmedic.
	})
	if err != nil {
		return nil, fmt.Errorf("argocd client for %s: %s", o.ServerAddr, redact(err.Error(), token))
	}
	return FromAPIClient(c)
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
