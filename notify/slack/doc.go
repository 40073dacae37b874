// Package slack posts incidents to Slack: with a bot token, one Block Kit root message per incident updated in place
// and a thread reply per step; with an incoming-webhook URL, one message per transition.
package slack
