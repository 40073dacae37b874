package testenv

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/common"
	"github.com/argoproj/argo-cd/v2/pkg/apiclient"
	accountpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/account"
	sessionpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/session"
	"github.com/argoproj/argo-cd/v2/util/password"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
)

// partOfArgoCD is the label Argo CD's settings manager selects its ConfigMaps and Secrets by.
var partOfArgoCD = map[string]string{"app.kubernetes.io/part-of": "argocd"}

// writeSettings creates the control-plane namespace, argocd-cm, argocd-rbac-cm and argocd-secret.
func (a *ArgoCDServer) writeSettings(ctx context.Context, opts ArgoCDOptions) error {
	hash, err := password.HashPassword(a.adminPassword)
	if err != nil {
		return err
	}
	cm := map[string]string{"url": "https://argocd.testenv.invalid"}
	for _, name := range opts.Accounts {
		cm["accounts."+name] = "apiKey"
	}
	for k, v := range opts.Settings {
		cm[k] = v
	}
	rbac := map[string]string{"policy.csv": strings.Join(opts.Policy, "\n"), "policy.default": opts.DefaultRole}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: a.Namespace, Labels: partOfArgoCD}
	}
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.Namespace}},
		&corev1.ConfigMap{ObjectMeta: meta(common.ArgoCDConfigMapName), Data: cm},
		&corev1.ConfigMap{ObjectMeta: meta(common.ArgoCDRBACConfigMapName), Data: rbac},
		&corev1.Secret{ObjectMeta: meta(common.ArgoCDSecretName), StringData: map[string]string{
			"server.secretkey": randomHex(32),
			"admin.password":   hash,
			// In the past, so that tokens issued in the same second as the settings are valid.
			"admin.passwordMtime": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
		}},
	}
	for _, o := range objects {
		if err := a.Env.Client.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// Client returns an Argo CD API client (the v2 apiclient, plaintext gRPC) using token; an empty token is
// anonymous (what DisableAuth servers expect).
func (a *ArgoCDServer) Client(t testing.TB, token string) apiclient.Client {
	t.Helper()
	c, err := apiclient.NewClient(&apiclient.ClientOptions{ServerAddr: a.Addr, PlainText: true, AuthToken: token})
	if err != nil {
		t.Fatalf("testenv: Argo CD API client: %v", err)
	}
	return c
}

// Applications returns an ApplicationService client using token, closed when the test ends.
func (a *ArgoCDServer) Applications(t testing.TB, token string) applicationpkg.ApplicationServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(a.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(argoToken(token)))
	if err != nil {
		t.Fatalf("testenv: Argo CD application client: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return applicationpkg.NewApplicationServiceClient(conn)
}

// argoToken sends an Argo CD API token as argocd-server reads it (the "token" metadata).
type argoToken string

func (t argoToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if t == "" {
		return nil, nil
	}
	return map[string]string{"token": string(t)}, nil
}

func (argoToken) RequireTransportSecurity() bool { return false }

// AdminToken logs the built-in admin account in through Argo CD's SessionService and returns the session token.
// With DisableAuth it returns "" (no token is needed).
func (a *ArgoCDServer) AdminToken(t testing.TB) string {
	t.Helper()
	if a.disableAuth {
		return ""
	}
	closer, sessions, err := a.Client(t, "").NewSessionClient()
	if err != nil {
		t.Fatalf("testenv: Argo CD session client: %v", err)
	}
	defer closeQuietly(closer)
	res, err := sessions.Create(context.Background(), &sessionpkg.SessionCreateRequest{
		Username: argocdAdmin, Password: a.adminPassword})
	if err != nil {
		t.Fatalf("testenv: logging in as admin: %v", err)
	}
	return res.Token
}

// Token issues an API token for one of ArgoCDOptions.Accounts through Argo CD's AccountService (signed by its own
// session manager, recorded in argocd-secret) and waits until the server accepts it.
func (a *ArgoCDServer) Token(t testing.TB, account string) string {
	t.Helper()
	if a.disableAuth {
		t.Fatal("testenv: tokens need an Argo CD server with auth on (DisableAuth is set)")
	}
	return a.TokenIssuedBy(t, a.AdminToken(t), account)
}

// TokenIssuedBy is Token issued by the caller of issuer (a session or API token) instead of admin: Argo CD lets
// whoever may "accounts, update, <account>" do it.
func (a *ArgoCDServer) TokenIssuedBy(t testing.TB, issuer, account string) string {
	t.Helper()
	closer, accounts, err := a.Client(t, issuer).NewAccountClient()
	if err != nil {
		t.Fatalf("testenv: Argo CD account client: %v", err)
	}
	defer closeQuietly(closer)
	res, err := accounts.CreateToken(context.Background(), &accountpkg.CreateTokenRequest{Name: account})
	if err != nil {
		t.Fatalf("testenv: creating a token for account %q (is it in ArgoCDOptions.Accounts?): %v", account, err)
	}
	if err := a.waitLoggedIn(t, res.Token, account); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return res.Token
}

// waitLoggedIn polls GetUserInfo until the server's settings informer has seen the new token.
func (a *ArgoCDServer) waitLoggedIn(t testing.TB, token, account string) error {
	closer, sessions, err := a.Client(t, token).NewSessionClient()
	if err != nil {
		return err
	}
	defer closeQuietly(closer)
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := sessions.GetUserInfo(context.Background(), &sessionpkg.GetUserInfoRequest{})
		if err == nil && info.LoggedIn && info.Username == account {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the token of account %q was not accepted within 30s (last: %+v, %v)", account, info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func closeQuietly(c io.Closer) { _ = c.Close() }
