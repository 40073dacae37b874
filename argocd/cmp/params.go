package cmp

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Environment variables Argo CD sets for a plugin's generate command (the "build environment").
const (
	EnvAppName       = "ARGOCD_APP_NAME"
	EnvAppNamespace  = "ARGOCD_APP_NAMESPACE"
	EnvAppParameters = "ARGOCD_APP_PARAMETERS"
	EnvKubeVersion   = "KUBE_VERSION"
	EnvAPIVersions   = "KUBE_API_VERSIONS"
)

// Plugin parameter names, as an Application's spec.source.plugin.parameters names them. Argo CD passes each one as
// PARAM_<NAME> (upper case, '-' as '_'); arrays as PARAM_<NAME>_<i>; and all of them as JSON in ARGOCD_APP_PARAMETERS.
const (
	ParamStrict      = "strict"       // "true": fail the render when any hazard is left
	ParamFix         = "fix"          // fix names, comma-separated or an array: delete-policy, knative-ownership, all
	ParamAnnotate    = "annotate"     // "true": annotate objects with the hazards left on them
	ParamValues      = "values"       // Helm: inline values YAML
	ParamValuesFiles = "values-files" // Helm: values files relative to the app directory, comma-separated or an array
	ParamSet         = "set"          // Helm: a map of --set style key=value overrides (only via ARGOCD_APP_PARAMETERS)
	ParamReleaseName = "release-name" // Helm: release name (default: ARGOCD_APP_NAME)
	ParamRecurse     = "recurse"      // plain directory: "true" to include subdirectories
	// ParamKustomizeAllowRemote "true" lets kustomize fetch remote resources and bases (http(s) files, git
	// repositories), which are refused otherwise; the render deadline bounds the fetches.
	ParamKustomizeAllowRemote = "kustomize-allow-remote"
)

// Fix names an opt-in fix.
type Fix string

// The opt-in fixes.
const (
	// FixDeletePolicy adds argocd.argoproj.io/hook-delete-policy: BeforeHookCreation to hook Jobs that have no
	// delete policy.
	FixDeletePolicy Fix = "delete-policy"
	// FixKnativeOwnership adds WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP=true to Knative webhook Deployments.
	FixKnativeOwnership Fix = "knative-ownership"
)

// AllFixes lists every fix; the parameter value "all" (or "true") selects them.
var AllFixes = []Fix{FixDeletePolicy, FixKnativeOwnership}

// Params is what the plugin reads from its environment.
type Params struct {
	AppName      string
	AppNamespace string
	Strict       bool
	Annotate     bool
	Fixes        map[Fix]bool
	Recurse      bool
	// KustomizeAllowRemote lets kustomize fetch remote resources and bases.
	KustomizeAllowRemote bool
	// Helm only.
	ReleaseName string
	Values      string
	ValuesFiles []string
	Set         map[string]string
	KubeVersion string
	APIVersions []string
}

// Enabled reports whether fix f was asked for.
func (p Params) Enabled(f Fix) bool { return p.Fixes[f] }

// param is one plugin parameter in any of Argo CD's three shapes.
type param struct {
	Name   string            `json:"name"`
	String *string           `json:"string,omitempty"`
	Array  []string          `json:"array,omitempty"`
	Map    map[string]string `json:"map,omitempty"`
}

// ParseParams reads the plugin parameters from an environment in os.Environ form. ARGOCD_APP_PARAMETERS, when
// present, is authoritative (it keeps names and map keys unescaped); otherwise PARAM_* variables are read, which is
// what a human running the command by hand sets.
func ParseParams(environ []string) (Params, error) {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			env[k] = v
		}
	}
	p := Params{
		AppName:      env[EnvAppName],
		AppNamespace: env[EnvAppNamespace],
		KubeVersion:  env[EnvKubeVersion],
		Fixes:        map[Fix]bool{},
	}
	if s := env[EnvAPIVersions]; s != "" {
		p.APIVersions = splitList(s)
	}
	params, err := collectParams(env)
	if err != nil {
		return Params{}, err
	}
	for _, setter := range []struct {
		name string
		dst  *bool
	}{{ParamStrict, &p.Strict}, {ParamAnnotate, &p.Annotate}, {ParamRecurse, &p.Recurse}, {ParamKustomizeAllowRemote, &p.KustomizeAllowRemote}} {
		if *setter.dst, err = boolParam(params, setter.name); err != nil {
			return Params{}, err
		}
	}
	for _, name := range listParam(params, ParamFix) {
		switch {
		case name == "all" || name == "true":
			for _, f := range AllFixes {
				p.Fixes[f] = true
			}
		case name == "false" || name == "none":
		case Fix(name) == FixDeletePolicy || Fix(name) == FixKnativeOwnership:
			p.Fixes[Fix(name)] = true
		default:
			return Params{}, fmt.Errorf("parameter %s: unknown fix %q: use %s, %s or all", ParamFix, name, FixDeletePolicy, FixKnativeOwnership)
		}
	}
	if v := params[ParamReleaseName]; v.String != nil {
		p.ReleaseName = strings.TrimSpace(*v.String)
	}
	if v := params[ParamValues]; v.String != nil {
		p.Values = *v.String
	}
	p.ValuesFiles = listParam(params, ParamValuesFiles)
	if m := params[ParamSet].Map; len(m) > 0 {
		p.Set = m
	}
	return p, nil
}

// collectParams returns the parameters by name, from ARGOCD_APP_PARAMETERS or else from PARAM_* variables.
func collectParams(env map[string]string) (map[string]param, error) {
	out := map[string]param{}
	if raw, ok := env[EnvAppParameters]; ok && strings.TrimSpace(raw) != "" {
		var list []param
		if err := json.Unmarshal([]byte(raw), &list); err != nil {
			return nil, fmt.Errorf("%s is not the JSON list Argo CD writes: %w", EnvAppParameters, err)
		}
		for _, x := range list {
			out[x.Name] = x
		}
		return out, nil
	}
	for _, name := range []string{ParamStrict, ParamFix, ParamAnnotate, ParamValues, ParamValuesFiles, ParamReleaseName, ParamRecurse, ParamKustomizeAllowRemote} {
		base := "PARAM_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		var x param
		if v, ok := env[base]; ok {
			x.String = &v
		}
		x.Array = indexed(env, base+"_")
		if x.String != nil || len(x.Array) > 0 {
			x.Name = name
			out[name] = x
		}
	}
	return out, nil
}

// indexed returns prefix0, prefix1, … in index order.
func indexed(env map[string]string, prefix string) []string {
	type item struct {
		i int
		v string
	}
	var items []item
	for k, v := range env {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil || i < 0 || strconv.Itoa(i) != rest {
			continue
		}
		items = append(items, item{i, v})
	}
	sort.Slice(items, func(a, b int) bool { return items[a].i < items[b].i })
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.v)
	}
	return out
}

func boolParam(params map[string]param, name string) (bool, error) {
	v := params[name].String
	if v == nil || strings.TrimSpace(*v) == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(*v))
	if err != nil {
		return false, fmt.Errorf("parameter %s: %q is not a boolean: use true or false", name, *v)
	}
	return b, nil
}

// listParam returns a parameter given as a comma-separated string, an array, or both.
func listParam(params map[string]param, name string) []string {
	x := params[name]
	var out []string
	if x.String != nil {
		out = append(out, splitList(*x.String)...)
	}
	for _, v := range x.Array {
		out = append(out, splitList(v)...)
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
