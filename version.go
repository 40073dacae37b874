package syncmedic

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// The build's identity, stamped at build time by `make release` (internal/release) with
// -ldflags "-X github.com/syncmedic/syncmedic.Version=v1.2.3 -X ….Commit=<sha> -X ….BuildDate=<RFC 3339>".
var (
	// Version is the syncmedic release.
	Version = "v0.1.0-dev"
	// Commit is the Git commit the binary was built from; when not stamped, the VCS revision `go build` recorded
	// (empty when it recorded none, as with -buildvcs=false).
	Commit = ""
	// BuildDate is when the source was committed (SOURCE_DATE_EPOCH, RFC 3339, UTC), so that a rebuild gives the
	// same bytes; when not stamped, the VCS commit time `go build` recorded.
	BuildDate = ""
)

// BuildInfo is the identity `syncmedic version` prints.
type BuildInfo struct {
	Version, Commit, BuildDate, GoVersion, Platform string
}

// ReadBuildInfo returns the stamped version, commit and build date, falling back to the VCS settings the Go
// toolchain recorded in the binary for the commit and date.
func ReadBuildInfo() BuildInfo {
	b := BuildInfo{Version: Version, Commit: Commit, BuildDate: BuildDate, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.time" && b.BuildDate == "":
				b.BuildDate = s.Value
			}
		}
	}
	return b
}

// String is the first line of `syncmedic version`, followed by a "commit:" and a "built:" line for each that is
// known: a binary built with -buildvcs=false and not stamped (`make image`) has neither.
func (b BuildInfo) String() string {
	s := fmt.Sprintf("syncmedic %s (%s, %s)\n", b.Version, b.GoVersion, b.Platform)
	if b.Commit != "" {
		s += "commit: " + b.Commit + "\n"
	}
	if b.BuildDate != "" {
		s += "built: " + b.BuildDate + "\n"
	}
	return s
}
