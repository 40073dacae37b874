package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
)

// TestVersionFlagPrintsWhatVersionPrints: `syncmedic --version` and `syncmedic version` print the same identity.
func TestVersionFlagPrintsWhatVersionPrints(t *testing.T) {
	want := syncmedic.ReadBuildInfo().String()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runCLI(t, args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		require.Equal(t, want, out, "%v", args)
	}
}
