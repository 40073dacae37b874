package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/syncmedic/syncmedic/internal/secretfile"
	"github.com/syncmedic/syncmedic/notify"
	"github.com/syncmedic/syncmedic/notify/alertmanager"
	"github.com/syncmedic/syncmedic/notify/kubeevents"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
	"github.com/syncmedic/syncmedic/notify/webhook"
	"github.com/syncmedic/syncmedic/policy"
)

// notifyOptions are serve's notifier flags. Secrets come from files only.
type notifyOptions struct {
	slackTokenFile      string
	slackChannel        string
	slackTeamID         string
	slackAPIURL         string
	slackWebhookURLFile string
	webhookURL          string
	webhookSecretFile   string
	kubeEvents          bool
	timeout             time.Duration
	// Alertmanager: base URLs (every replica of a cluster), credentials from files, how often open alerts are re-posted.
	alertmanagerURLs            []string
	alertmanagerBearerTokenFile string
	alertmanagerUsername        string
	alertmanagerPasswordFile    string
	alertmanagerResend          time.Duration
	// Slack interactivity: the app-level token (Socket Mode) or the signing secret (the HTTP request URL), from files.
	slackAppTokenFile      string
	slackSigningSecretFile string
	// slackSilenceDurations are the choices of the Silence… dialog.
	slackSilenceDurations []time.Duration
	// log receives what a notifier reports besides its result (an Alertmanager replica that refused a post others
	// took); nil: discarded. policy is the policy in force (Slack's Fix… button asks fixBy). serve sets both before
	// destinations.
	log    *slog.Logger
	policy func() *policy.Policy
}

// notifyState is what the notifiers keep and read in the tracker: Slack's threads, and the incidents Alertmanager
// re-posts. *incident.Tracker implements it.
type notifyState interface {
	notify.Notes
	alertmanager.Incidents
}

func addNotifyFlags(cmd *cobra.Command, o *notifyOptions) {
	f := cmd.Flags()
	f.StringVar(&o.slackTokenFile, "slack-token-file", "", "file holding the Slack bot token (xoxb-…): one thread per incident, updated in place")
	f.StringVar(&o.slackChannel, "slack-channel", "", "Slack channel for the bot token mode")
	f.StringVar(&o.slackTeamID, "slack-team-id", "", "the Slack workspace (team ID, T…) the bot is installed in: serve starts only when auth.test confirms the bot token belongs to it, and acts on no click from another workspace")
	f.StringVar(&o.slackAPIURL, "slack-api-url", "", "Slack Web API base URL (default https://slack.com/api/; for a Slack-compatible endpoint or a test server)")
	f.StringVar(&o.slackAppTokenFile, "slack-app-token-file", "", "file holding the Slack app-level token (xapp-…, scope connections:write): turns the thread's buttons on and receives their clicks over Socket Mode (no public URL needed; with --slack-token-file)")
	f.StringVar(&o.slackSigningSecretFile, "slack-signing-secret-file", "", "file holding the Slack app's signing secret: turns the thread's buttons on and receives their clicks at the request URL "+slacknotify.InteractionsPath+" on --listen, each verified (instead of --slack-app-token-file)")
	f.DurationSliceVar(&o.slackSilenceDurations, "slack-silence-durations", slacknotify.DefaultSilenceDurations(), "the choices of the thread's Silence… dialog, the first preselected (e.g. 30m,2h,24h); a submission of another duration is refused")
	f.StringVar(&o.slackWebhookURLFile, "slack-webhook-url-file", "", "file holding a Slack incoming-webhook URL: one message per transition (instead of a bot token)")
	f.StringVar(&o.webhookURL, "webhook-url", "", "URL receiving every incident transition as JSON")
	f.StringVar(&o.webhookSecretFile, "webhook-secret-file", "", "file holding the HMAC key that signs --webhook-url posts (X-Signature: sha256=<hex>)")
	f.BoolVar(&o.kubeEvents, "kube-events", true, "record Kubernetes Events on affected objects (needs a cluster)")
	f.StringSliceVar(&o.alertmanagerURLs, "alertmanager-url", nil, "Alertmanager base URL (http(s)://host:9093[/prefix]) receiving each incident as an alert; repeat it or separate with commas for every replica of a cluster")
	f.StringVar(&o.alertmanagerBearerTokenFile, "alertmanager-bearer-token-file", "", "file holding a bearer token for the Alertmanager API")
	f.StringVar(&o.alertmanagerUsername, "alertmanager-username", "", "basic-auth user for the Alertmanager API (with --alertmanager-password-file)")
	f.StringVar(&o.alertmanagerPasswordFile, "alertmanager-password-file", "", "file holding the basic-auth password for the Alertmanager API")
	f.DurationVar(&o.alertmanagerResend, "alertmanager-resend-interval", alertmanager.DefaultResendInterval, "how often open incidents are posted to Alertmanager again; each post keeps the alert firing for 4 intervals")
	f.DurationVar(&o.timeout, "notify-timeout", notify.DefaultTimeout, "how long one notification attempt may take (every HTTP call of a notifier included) before it is cut off and retried")
}

// destinations builds the configured notifiers; notes is where Slack keeps its threads (the tracker).
func (o *notifyOptions) destinations(notes notifyState, kube kubernetes.Interface, identity string) ([]notify.Destination, error) {
	if o.timeout <= 0 {
		return nil, fmt.Errorf("--notify-timeout must be positive, not %s", o.timeout)
	}
	out, err := o.notifiers(notes, kube, identity)
	for i := range out {
		out[i].Timeout = o.timeout
	}
	return out, err
}

func (o *notifyOptions) notifiers(notes notifyState, kube kubernetes.Interface, identity string) ([]notify.Destination, error) {
	var out []notify.Destination
	client := notify.NewHTTPClient(o.timeout)
	if o.slackTeamID != "" && o.slackTokenFile == "" {
		return nil, errors.New("--slack-team-id needs --slack-token-file: the workspace is confirmed with the bot token (auth.test)")
	}
	switch {
	case o.slackTokenFile != "" && o.slackWebhookURLFile != "":
		return nil, errors.New("give --slack-token-file or --slack-webhook-url-file, not both")
	case o.slackTokenFile != "":
		token, err := readSecret("--slack-token-file", o.slackTokenFile)
		if err != nil {
			return nil, err
		}
		if o.slackChannel == "" {
			return nil, errors.New("--slack-token-file needs --slack-channel")
		}
		if err := o.checkSlackInteractivity(); err != nil {
			return nil, err
		}
		if err := o.checkSlackTeam(token, client); err != nil {
			return nil, err
		}
		so := slacknotify.Options{Token: token, Channel: o.slackChannel, Notes: notes, APIURL: o.slackAPIURL, HTTPClient: client}
		// Read again when the file changes: a rotated Secret takes effect at the next notification.
		if f, err := secretfile.Open("--slack-token-file", o.slackTokenFile); err == nil {
			so.TokenSource = f.Value
		}
		if o.slackInteractive() {
			so.Buttons = o.slackButtons
		}
		n, err := slacknotify.New(so)
		if err != nil {
			return nil, err
		}
		out = append(out, notify.Destination{Name: "slack", Notifier: n})
	case o.slackInteractive():
		return nil, o.checkSlackInteractivity()
	case o.slackWebhookURLFile != "":
		u, err := readSecret("--slack-webhook-url-file", o.slackWebhookURLFile)
		if err != nil {
			return nil, err
		}
		n, err := slacknotify.NewWebhook(slacknotify.WebhookOptions{URL: u, HTTPClient: client})
		if err != nil {
			return nil, err
		}
		out = append(out, notify.Destination{Name: "slack-webhook", Notifier: n})
	}
	if o.webhookURL != "" {
		var secret []byte
		if o.webhookSecretFile != "" {
			s, err := readSecret("--webhook-secret-file", o.webhookSecretFile)
			if err != nil {
				return nil, err
			}
			secret = []byte(s)
		}
		n, err := webhook.New(webhook.Options{URL: o.webhookURL, Secret: secret, HTTPClient: client})
		if err != nil {
			return nil, err
		}
		out = append(out, notify.Destination{Name: "webhook", Notifier: n})
	}
	if len(o.alertmanagerURLs) > 0 {
		dest, err := o.alertmanager(notes, client)
		if err != nil {
			return nil, err
		}
		out = append(out, dest)
	} else if o.alertmanagerBearerTokenFile != "" || o.alertmanagerUsername != "" || o.alertmanagerPasswordFile != "" {
		return nil, errors.New("--alertmanager-bearer-token-file, --alertmanager-username and --alertmanager-password-file need --alertmanager-url")
	}
	if o.kubeEvents && kube != nil {
		out = append(out, notify.Destination{Name: "kubernetes-events", Notifier: kubeevents.New(kubeevents.Options{Client: kube, Host: identity})})
	}
	return out, nil
}

// alertmanager builds the Alertmanager destination, re-posting the tracker's open incidents every resend interval.
func (o *notifyOptions) alertmanager(incidents alertmanager.Incidents, client *http.Client) (notify.Destination, error) {
	ao := alertmanager.Options{URLs: o.alertmanagerURLs, Username: o.alertmanagerUsername, ResendInterval: o.alertmanagerResend,
		Incidents: incidents, HTTPClient: client, Log: o.log}
	if o.alertmanagerResend <= 0 {
		return notify.Destination{}, fmt.Errorf("--alertmanager-resend-interval must be positive, not %s", o.alertmanagerResend)
	}
	if o.alertmanagerBearerTokenFile != "" {
		t, err := readSecret("--alertmanager-bearer-token-file", o.alertmanagerBearerTokenFile)
		if err != nil {
			return notify.Destination{}, err
		}
		ao.BearerToken = t
	}
	if o.alertmanagerPasswordFile != "" {
		p, err := readSecret("--alertmanager-password-file", o.alertmanagerPasswordFile)
		if err != nil {
			return notify.Destination{}, err
		}
		ao.Password = p
	}
	if (ao.Username == "") != (ao.Password == "") {
		return notify.Destination{}, errors.New("--alertmanager-username and --alertmanager-password-file go together")
	}
	if ao.BearerToken != "" && ao.Username != "" {
		return notify.Destination{}, errors.New("give --alertmanager-bearer-token-file or --alertmanager-username/--alertmanager-password-file, not both")
	}
	n, err := alertmanager.New(ao)
	if err != nil {
		return notify.Destination{}, fmt.Errorf("--alertmanager-url: %w", err)
	}
	return notify.Destination{Name: alertmanager.DefaultName, Notifier: n, Refresher: n}, nil
}

// readSecret reads a secret file, trimmed; the error names the flag and the file, never the content.
func readSecret(flag, file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", flag, file)
	}
	return s, nil
}

// secretSource reads a secret file as readSecret does and returns what reads it again whenever its file changes (a
// Secret updated in place), keeping the last good value while it cannot be read.
func secretSource(flag, file string) (func() string, error) {
	first, err := readSecret(flag, file)
	if err != nil {
		return nil, err
	}
	f, err := secretfile.Open(flag, file)
	if err != nil { // replaced between the two reads: the first value stays
		return func() string { return first }, nil
	}
	return f.Value, nil
}

func destNames(ds []notify.Destination) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}
