package docgen

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReplace(t *testing.T) {
	section := Begin("flags") + "\nold\n" + End("flags")
	for _, tc := range []struct {
		name, page, want, err string
	}{
		{name: "the body between the markers is replaced, the prose around it kept",
			page: "# CLI\nprose\n" + section + "\nmore prose\n",
			want: "# CLI\nprose\n" + Begin("flags") + "\n| new |\n" + End("flags") + "\nmore prose\n"},
		{name: "no markers", page: "# CLI\n", err: `0 lines "<!-- BEGIN GENERATED: flags -->", want exactly one`},
		{name: "two sections of one name", page: section + "\n" + section + "\n", err: "2 lines"},
		{name: "no end marker", page: Begin("flags") + "\nold\n", err: `0 markers "<!-- END GENERATED: flags (make docs) -->"`},
		{name: "end before begin", page: End("flags") + "\n" + Begin("flags") + "\n", err: "comes before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Replace([]byte(tc.page), "flags", "| new |")
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}

func TestSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cli.md")
	stale := "# CLI\n" + Begin("flags") + "\n| old |\n" + End("flags") + "\n"
	require.NoError(t, os.WriteFile(path, []byte(stale), 0o644))

	err := Sync(path, "flags", "| new |", false)
	require.EqualError(t, err, path+`: the generated section "flags" is not what the code generates (line 3 is "| old |", the code generates "| new |"): run `+"`make docs`"+` and commit `+path)
	b, _ := os.ReadFile(path)
	require.Equal(t, stale, string(b), "a check leaves the page alone")

	require.NoError(t, Sync(path, "flags", "| new |", true))
	b, _ = os.ReadFile(path)
	require.Equal(t, "# CLI\n"+Begin("flags")+"\n| new |\n"+End("flags")+"\n", string(b))
	require.NoError(t, Sync(path, "flags", "| new |", false), "the updated page passes the check")
}

func TestTable(t *testing.T) {
	require.Equal(t, "| a | b |\n|---|---|\n| x \\| y | two lines |\n",
		Table([]string{"a", "b"}, [][]string{{"x | y", "two\nlines"}}))
}
