package benchutil

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAResultIsWrittenWithItsMachineCommitDateAndFigures(t *testing.T) {
	dir := t.TempDir()
	r := NewResult("receiverload", []string{"-n", "2000"})
	r.Add("receiver/baseline throughput ratio", "%.2f", 0.876)
	r.Add("baseline", "%8.0f req/s", 22382.0)
	path, err := r.Write(dir)
	require.NoError(t, err)
	require.Equal(t, dir, filepath.Dir(path))
	require.True(t, strings.HasPrefix(filepath.Base(path), "receiverload-"), path)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var got Result
	require.NoError(t, json.Unmarshal(data, &got))
	require.Equal(t, "go run ./bench/receiverload -n 2000", got.Command)
	require.NotEmpty(t, got.Date)
	require.NotEmpty(t, got.Commit)
	require.Positive(t, got.Machine.NProc)
	require.NotEmpty(t, got.Machine.CPUModel)
	require.NotEmpty(t, got.Machine.Go)
	require.Empty(t, got.Source, "a file the tool wrote is not transcribed")
	require.Equal(t, []Figure{{"receiver/baseline throughput ratio", "0.88"}, {"baseline", "22382 req/s"}}, got.Figures)
}
