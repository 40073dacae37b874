package fluxreal

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestWaitArtifactServerTellsATakenPortFromItsOwn: source-controller only logs that its artifact server could not
// listen, so a connection to the port proves nothing when another process took it; waitArtifactServer reads the log
// too, and startSourceController then starts it again on another port.
func TestWaitArtifactServerTellsATakenPortFromItsOwn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	addr := l.Addr().String()
	log := filepath.Join(t.TempDir(), "source-controller.log")
	c := &testenv.Child{Name: "source-controller", LogPath: log}

	require.NoError(t, os.WriteFile(log, []byte("INFO\tsetup\tstarting manager\n"+
		"ERROR\tsetup\tartifact server error\t{\"error\": \"listen tcp "+addr+": bind: address already in use\"}\n"), 0o644))
	require.ErrorContains(t, waitArtifactServer(c, addr, 2*time.Second), "could not listen on "+addr)

	require.NoError(t, os.WriteFile(log, []byte("INFO\tsetup\tstarting manager\n"), 0o644))
	require.NoError(t, waitArtifactServer(c, addr, 2*time.Second), "listening, and no error logged")

	require.NoError(t, l.Close())
	require.ErrorContains(t, waitArtifactServer(c, addr, time.Second), "did not listen")
}
