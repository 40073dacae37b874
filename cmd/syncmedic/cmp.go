package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncmedic/syncmedic/argocd/cmp"
	"github.com/syncmedic/syncmedic/argocd/cmp/repofs"
)

func init() { subcommands = append(subcommands, newCMPCommand) }

func newCMPCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "cmp",
		Short: "Argo CD Config Management Plugin: render an app and lint it for stuck-sync hazards",
		Long: "The commands an Argo CD CMP v2 sidecar runs (see manifests/argocd-cmp). `generate` renders the app\n" +
			"directory it runs in (plain YAML/JSON, kustomize or a Helm chart), prints the manifests unchanged unless an\n" +
			"opt-in fix applies, and reports hook and webhook hazards on stderr. Parameters come from Argo CD:\n" +
			"ARGOCD_APP_NAME, ARGOCD_APP_NAMESPACE, ARGOCD_APP_PARAMETERS and PARAM_STRICT, PARAM_FIX, PARAM_ANNOTATE,\n" +
			"PARAM_VALUES, PARAM_VALUES_FILES, PARAM_RELEASE_NAME, PARAM_RECURSE, PARAM_KUSTOMIZE_ALLOW_REMOTE.",
	}
	c.AddCommand(newCMPGenerateCommand(), newCMPLintCommand())
	return c
}

// defaultRenderTimeout stays below Argo CD's 60 s repo-server timeout, so that Argo CD shows the plugin's own error.
const defaultRenderTimeout = 45 * time.Second

func newCMPGenerateCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Render the app in the current directory, lint it, and print the manifests (the CMP generate command)",
		Long: "Render the app in the current directory, lint it, and print the manifests (the CMP generate command).\n" +
			"It reads only regular files inside the repository the cmp-server unpacked (values files, chart and\n" +
			"kustomize files; symbolic links resolved; 8 MiB per file), refuses kustomize remote resources and bases\n" +
			"unless the parameter kustomize-allow-remote is true, and stops at the render timeout.",
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if timeout <= 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--render-timeout %s: must be positive, e.g. 45s", timeout)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := cmp.ParseParams(os.Environ())
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			root, err := repofs.Find(".", os.Environ())
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			_, err = cmp.Generate(ctx, root, ".", p, cmd.OutOrStdout(), cmd.ErrOrStderr())
			return cmpExit(err)
		},
	}
	cmd.Flags().DurationVar(&timeout, "render-timeout", defaultRenderTimeout, "how long rendering (helm templates, kustomize build) may take before the command fails")
	documentEnv(cmd)
	return cmd
}

// cmpExit maps a cmp error to an exit code: 1 for hazards left in strict mode, 3 for a render that failed.
func cmpExit(err error) error {
	if err == nil {
		return nil
	}
	var strict *cmp.StrictError
	if errors.As(err, &strict) {
		return &exitError{code: exitStuck, err: err}
	}
	return &exitError{code: exitFailed, err: err}
}

// cmpLintOptions are the flags of `syncmedic cmp lint`.
type cmpLintOptions struct {
	appName, namespace, values, releaseName string
	valuesFiles, fixes, set                 []string
	recurse                                 bool
}

func newCMPLintCommand() *cobra.Command {
	o := &cmpLintOptions{}
	cmd := &cobra.Command{
		Use:   "lint [DIR]",
		Short: "Render an app directory the way the plugin does and list its hazards; exit 1 if any is left",
		Example: `  syncmedic cmp lint              # the current directory
  syncmedic cmp lint ./deploy/my-app
  syncmedic cmp lint charts/kyverno --app-name kyverno --namespace kyverno --values-file values-prod.yaml`,
		Args: cobra.MaximumNArgs(1),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			return runCMPLint(cmd, dir, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.appName, "app-name", "", "app name, the Helm release name (default: the directory's name)")
	f.StringVar(&o.namespace, "namespace", "default", "the app's destination namespace")
	f.StringVar(&o.values, "values", "", "Helm: inline values YAML")
	f.StringArrayVar(&o.valuesFiles, "values-file", nil, "Helm: values file relative to DIR (repeatable)")
	f.StringArrayVar(&o.set, "set", nil, "Helm: key=value override (repeatable)")
	f.StringVar(&o.releaseName, "release-name", "", "Helm: release name (default: --app-name)")
	f.StringArrayVar(&o.fixes, "fix", nil, "apply this fix before linting: delete-policy, knative-ownership or all (repeatable)")
	f.BoolVar(&o.recurse, "recurse", false, "plain directory: include subdirectories")
	documentEnv(cmd)
	return cmd
}

func runCMPLint(cmd *cobra.Command, dir string, o *cmpLintOptions) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		if err == nil {
			err = fmt.Errorf("%s is not a directory: give the app's directory", dir)
		}
		return &exitError{code: exitUsage, err: err} // the user's input, not a failed action
	}
	if o.appName == "" {
		o.appName = filepath.Base(abs)
	}
	env := []string{
		cmp.EnvAppName + "=" + o.appName, cmp.EnvAppNamespace + "=" + o.namespace,
		"PARAM_VALUES=" + o.values, "PARAM_RELEASE_NAME=" + o.releaseName,
		"PARAM_FIX=" + strings.Join(o.fixes, ","), "PARAM_VALUES_FILES=" + strings.Join(o.valuesFiles, ","),
		fmt.Sprintf("PARAM_RECURSE=%t", o.recurse),
	}
	p, err := cmp.ParseParams(env)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	for _, kv := range o.set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return &exitError{code: exitUsage, err: fmt.Errorf("--set %q: want key=value", kv)}
		}
		if p.Set == nil {
			p.Set = map[string]string{}
		}
		p.Set[k] = v
	}
	root, err := repofs.Find(abs, os.Environ())
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	res, err := cmp.Generate(cmd.Context(), root, abs, p, io.Discard, io.Discard)
	if err != nil {
		return cmpExit(err)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "%s: %s, %d document(s)\n", dir, res.Source, len(res.Docs))
	if len(res.Hazards) == 0 {
		fmt.Fprintln(out, "no hazards")
		return nil
	}
	if err := cmp.WriteReport(out, res.Hazards, cmp.Params{Annotate: true}); err != nil {
		return err
	}
	if len(res.Unfixed()) > 0 {
		return &exitError{code: exitStuck}
	}
	return nil
}
