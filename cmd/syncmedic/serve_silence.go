package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/syncmedic/syncmedic/silence"
)

// silenceDuration is a flag value read as silence durations are ("36h", "7d", "1w").
type silenceDuration time.Duration

var _ pflag.Value = (*silenceDuration)(nil)

// Set reads a positive duration.
func (d *silenceDuration) Set(s string) error {
	v, err := silence.ParseDuration(s)
	if err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("%q: want a positive duration such as \"24h\" or \"7d\"", s)
	}
	*d = silenceDuration(v)
	return nil
}

func (d *silenceDuration) String() string { return silence.FormatDuration(time.Duration(*d)) }

// Type names the value in --help.
func (d *silenceDuration) Type() string { return "duration" }

// addSilenceFlags adds the bounds of silences to serve's flags.
func addSilenceFlags(f *pflag.FlagSet, o *serveOptions) {
	o.silenceMaxDuration = silenceDuration(silence.DefaultMaxDuration)
	f.Var(&o.silenceMaxDuration, "silence-max-duration", "how long a silence may last (Go durations, or days such as 7d): a longer one is refused, "+
		"from the API and from Slack alike")
}

// validateSilences checks that every choice of Slack's Silence… dialog fits in --silence-max-duration.
func (o *serveOptions) validateSilences() error {
	maxD := time.Duration(o.silenceMaxDuration)
	for _, d := range o.notify.slackSilenceDurations {
		if d > maxD {
			return fmt.Errorf("--slack-silence-durations: %s is longer than --silence-max-duration %s: offer shorter choices or raise the maximum",
				silence.FormatDuration(d), silence.FormatDuration(maxD))
		}
	}
	return nil
}
