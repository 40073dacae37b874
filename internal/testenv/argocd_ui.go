package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/argoproj/argo-cd/v2/util/password"
)

// ArgoCDUIOptions makes a stack's argocd-server serve Argo CD's own web UI (built from the version's sources by
// `make tools-argocd-ui` into bin/argocd-ui-<version>, given to --staticassets) with UI and proxy extensions
// configured the way an installation configures them. A stack with UI options is its own stack (not the version's
// shared one): its settings are the test's.
type ArgoCDUIOptions struct {
	// Extensions is a directory argocd-server sees as its /tmp/extensions/, where Argo CD's extension installer puts
	// extensions (argocd-server walks it for extension*.js on every GET /extensions.js, so files may be added after
	// the start). argocd-server runs in a mount namespace of its own where /tmp is the machine's /tmp with
	// /tmp/extensions/ added (an overlay), so nothing else on the machine sees it. Empty: no extensions directory.
	Extensions string
	// Settings are extra argocd-cm entries (extension.config.<name>).
	Settings map[string]string
	// Secrets are extra argocd-secret keys (the "$key" references of extension.config).
	Secrets map[string]string
	// Policy holds argocd-rbac-cm policy.csv lines.
	Policy []string
	// CmdParams are argocd-cmd-params-cm entries for argocd-server, given to it as the environment variables its
	// Deployment maps them to: "server.enable.proxy.extension" is ARGOCD_SERVER_ENABLE_PROXY_EXTENSION.
	CmdParams map[string]string
	// Users are local accounts that log in to the UI with a password (name to password): "apiKey, login" in
	// argocd-cm, the bcrypt hash in argocd-secret. They need not be in ArgoCDStackOptions.Accounts.
	Users map[string]string
}

// ArgoCDUIDir is bin/argocd-ui-<version>, Argo CD's web UI built by `make tools-argocd-ui`.
func ArgoCDUIDir(version string) (string, error) {
	bin, err := BinDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(bin, "argocd-ui-"+version)
	if _, err := os.Stat(filepath.Join(dir, "index.html")); err != nil {
		return "", fmt.Errorf("%s/index.html not found: run `make tools-argocd-ui` first (hack/argocd-ui.sh builds Argo CD %s's UI)", dir, version)
	}
	return dir, nil
}

// settings returns the argocd-cm entries and argocd-secret keys o adds to a stack's base settings.
func (o *ArgoCDUIOptions) settings(base map[string]string) (cm, secrets map[string]string, err error) {
	cm, secrets = map[string]string{}, map[string]string{}
	for k, v := range base {
		cm[k] = v
	}
	for k, v := range o.Settings {
		cm[k] = v
	}
	for k, v := range o.Secrets {
		secrets[k] = v
	}
	for name, pw := range o.Users {
		hash, err := password.HashPassword(pw)
		if err != nil {
			return nil, nil, err
		}
		cm["accounts."+name] = "apiKey, login"
		secrets["accounts."+name+".password"] = hash
		// In the past, so that sessions started in the same second as the settings are valid.
		secrets["accounts."+name+".passwordMtime"] = time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	}
	return cm, secrets, nil
}

// applySettings writes o's settings for server (its argocd-cm, argocd-rbac-cm and argocd-secret), base being the
// stack's own argocd-cm entries.
func (o *ArgoCDUIOptions) applySettings(ctx context.Context, server *ArgoCDServer, accounts []string, base map[string]string) error {
	cm, secrets, err := o.settings(base)
	if err != nil {
		return err
	}
	if err := server.writeSettings(ctx, ArgoCDOptions{Accounts: accounts, Settings: cm, Policy: o.Policy}); err != nil {
		return err
	}
	return server.addSecrets(ctx, secrets)
}

// cmdParamEnv is the environment variable argocd-server's Deployment sets from argocd-cmd-params-cm key k:
// ARGOCD_ and the key in upper case with dots and dashes as underscores.
func cmdParamEnv(k string) string {
	return "ARGOCD_" + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(k))
}

// uiNamespaceScript runs as `sh -c` inside a new mount namespace (unshare --mount, private propagation): it mounts
// a tmpfs on /mnt (this namespace only), binds the extensions directory $1 there, lays an overlay over /tmp (the
// machine's /tmp below, the tmpfs above: the process reads and writes /tmp as usual, its writes stay in the
// namespace), creates /tmp/extensions in it, moves the bind there, and execs the rest of its arguments.
const uiNamespaceScript = `set -e
ext=$1; shift
mount -t tmpfs -o mode=0755 syncmedic-argocd-ui /mnt
mkdir /mnt/ext /mnt/upper /mnt/work
mount --bind "$ext" /mnt/ext
mount -t overlay syncmedic-argocd-ui-tmp -o lowerdir=/tmp,upperdir=/mnt/upper,workdir=/mnt/work /tmp
mkdir -p /tmp/extensions
mount --move /mnt/ext /tmp/extensions
exec "$@"`

// server returns how to start argocd-server with o: the executable (bin/argocd-<version>-ui, the version's
// multi-call binary with the built UI embedded, as Argo CD's release images build it: argocd-server reads index.html
// only from its embedded files, a placeholder in the Go module), its environment (envv with the cmd-params
// variables) and how to turn its arguments into the executable's (--staticassets the built UI; inside the mount
// namespace when there is an extensions directory).
func (o *ArgoCDUIOptions) server(version string, envv []string) (string, []string, func([]string) []string, error) {
	ui, err := ArgoCDUIDir(version)
	if err != nil {
		return "", nil, nil, err
	}
	exe := filepath.Join(filepath.Dir(ui), "argocd-"+version+"-ui")
	if !isExecutable(exe) {
		return "", nil, nil, fmt.Errorf("%s not found: run `make tools-argocd-ui` first", exe)
	}
	env := append([]string(nil), envv...)
	for k, v := range o.CmdParams {
		env = append(env, cmdParamEnv(k)+"="+v)
	}
	staticAssets := func(args []string) []string {
		out := append([]string(nil), args...)
		for i := 0; i+1 < len(out); i++ {
			if out[i] == "--staticassets" {
				out[i+1] = ui
				return out
			}
		}
		return append(out, "--staticassets", ui)
	}
	if o.Extensions == "" {
		return exe, env, staticAssets, nil
	}
	if os.Geteuid() != 0 {
		return "", nil, nil, fmt.Errorf("argocd-server reads UI extensions from /tmp/extensions/ only; testenv gives it its own in a mount namespace, which needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return "", nil, nil, fmt.Errorf("unshare (util-linux) not found: %w", err)
	}
	return unshare, env, func(args []string) []string {
		return append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", uiNamespaceScript,
			"argocd-ui-namespace", o.Extensions, exe}, staticAssets(args)...)
	}, nil
}
