package imagebuild

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBuildRefusesIncompleteOptionsBeforeBuilding(t *testing.T) {
	ok := Options{Name: "registry.example.com/syncmedic:v1", Version: "v1", ModuleRoot: t.TempDir(), WorkDir: t.TempDir()}
	cases := []struct {
		name   string
		change func(o *Options)
		want   string
	}{
		{"no name", func(o *Options) { o.Name = "" }, "required"},
		{"no version", func(o *Options) { o.Version = "" }, "required"},
		{"no tag", func(o *Options) { o.Name = "registry.example.com:5000/syncmedic" }, "has no tag"},
		{"no CA bundle", func(o *Options) { o.CACertsFile = "/nonexistent/ca.crt" }, "apt-get install ca-certificates"},
		{"not linux", func(o *Options) { o.Platforms = []string{"windows/amd64"} }, `platform "windows/amd64"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := ok
			c.change(&o)
			_, err := Build(context.Background(), o)
			require.ErrorContains(t, err, c.want)
		})
	}
}
