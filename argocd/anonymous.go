package argocd

import (
	"context"
	"fmt"

	accountpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/account"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ExtensionName is the name syncmedic's proxy and UI extension has in argocd-cm (extension.config.syncmedic) and in
// Argo CD's RBAC (extensions, invoke, syncmedic).
const ExtensionName = "syncmedic"

// AnonymousMayInvoke asks argocd-server, as a caller without a token, CanI `extensions, invoke, <extension>`.
// argocd-server answers only when argocd-cm's users.anonymous.enabled is "true" (otherwise: Unauthenticated, which is
// a "no"), and then with what policy.default grants: "yes" means that whoever reaches argocd-server reaches
// syncmedic's API through the proxy extension, as a caller with no user name and whatever Argocd-User-Groups the
// browser sends. The connection is o's without its token.
func AnonymousMayInvoke(ctx context.Context, o ClientOptions, extension string) (bool, error) {
	o.TokenFile, o.Token = "", ""
	c, err := dial(o, "")
	if err != nil {
		return false, err
	}
	defer c.Close()
	res, err := c.AccountClient.CanI(ctx, &accountpkg.CanIRequest{Resource: "extensions", Action: "invoke", Subresource: extension})
	if status.Code(err) == codes.Unauthenticated {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("argocd CanI extensions, invoke, %s without a token: %w", extension, err)
	}
	return res.GetValue() == "yes", nil
}

// AnonymousExtensionWarning is the warning serve logs when AnonymousMayInvoke answers yes; trustGroups is the
// policy's trustProxyGroups.
func AnonymousExtensionWarning(extension string, trustGroups bool) string {
	w := "Argo CD lets anonymous users invoke the " + extension + " extension (argocd-cm users.anonymous.enabled is \"true\" and " +
		"policy.default in argocd-rbac-cm grants extensions, invoke, " + extension + "): whoever reaches argocd-server reads " +
		"the incidents of every application the default role may get, through the proxy extension"
	if trustGroups {
		w += ", and with trustProxyGroups on can claim any group in Argocd-User-Groups, so every group: entry of fixBy, " +
			"silenceBy and ackBy lets anonymous callers act. Turn users.anonymous.enabled off, or turn trustProxyGroups off " +
			"and use user: entries"
	} else {
		w += " (writes stay refused: anonymous requests carry no Argocd-Username). Turn users.anonymous.enabled off, or " +
			"remove extensions, invoke, " + extension + " from the default role, unless the incidents may be public to everyone " +
			"who reaches Argo CD"
	}
	return w
}
