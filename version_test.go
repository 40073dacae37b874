package syncmedic

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBuildInfoStringNamesWhatIsKnown(t *testing.T) {
	cases := []struct {
		name string
		info BuildInfo
		want string
	}{
		{"a release: commit and date stamped",
			BuildInfo{Version: "v0.1.0", Commit: "0123456789abcdef0123456789abcdef01234567", BuildDate: "2026-11-29T10:00:00Z", GoVersion: "go1.26.8", Platform: "darwin/arm64"},
			"syncmedic v0.1.0 (go1.26.8, darwin/arm64)\ncommit: 0123456789abcdef0123456789abcdef01234567\nbuilt: 2026-11-29T10:00:00Z\n"},
		{"make image: neither stamped nor recorded",
			BuildInfo{Version: "v0.1.0", GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"syncmedic v0.1.0 (go1.26.8, linux/amd64)\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, c.info.String())
		})
	}
}
