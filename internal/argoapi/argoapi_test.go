package argoapi_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	upstreamapp "github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	upstream "github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	fuzz "github.com/google/gofuzz"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// TestCopyIsFromThePinnedModules checks SOURCES against the module cache and the tree: every upstream file the copy
// was generated from is still the one the pinned argo-cd/v2 and gitops-engine modules hold, and no generated file
// was edited by hand. A bump of either module fails here until `go generate ./internal/argoapi` is run.
func TestCopyIsFromThePinnedModules(t *testing.T) {
	f, err := os.Open("SOURCES")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dirs := map[string]string{} // module@version → module cache directory
	var upstreamFiles, copies int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			t.Fatalf("SOURCES: malformed line %q", sc.Text())
		}
		if fields[0] == "copy" {
			copies++
			t.Run(fields[1]+" is what the generator wrote", func(t *testing.T) {
				checkSum(t, filepath.Join("..", "..", fields[1]), fields[2])
			})
			continue
		}
		upstreamFiles++
		modVersion, file, sum := fields[0], fields[1], fields[2]
		t.Run(modVersion+" "+file+" is still the file the copy was generated from", func(t *testing.T) {
			mod, version, _ := strings.Cut(modVersion, "@")
			dir, ok := dirs[modVersion]
			if !ok {
				out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}} {{.Dir}}", mod).Output()
				if err != nil {
					t.Fatalf("go list -m %s: %v", mod, err)
				}
				got := strings.Fields(string(out))
				if len(got) != 2 || got[0] != version {
					t.Fatalf("go.mod requires %s %s, the copy is of %s: run go generate ./internal/argoapi", mod, got, version)
				}
				dir = got[1]
				dirs[modVersion] = dir
			}
			checkSum(t, filepath.Join(dir, file), sum)
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if upstreamFiles == 0 || copies == 0 {
		t.Fatalf("SOURCES names %d upstream files and %d copies", upstreamFiles, copies)
	}
}

func checkSum(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("%s has sha256 %s, SOURCES says %s: run go generate ./internal/argoapi (and never edit the copy by hand)", path, got, want)
	}
}

// filler fills Argo CD objects with random values, as Kubernetes' round-trip tests do: every field set (no nil: gogo
// cannot encode the nil entries of a slice of pointers, which no real object has),
// maps and slices of one or two entries, times in whole seconds (JSON keeps no more).
func filler(seed int64) *fuzz.Fuzzer {
	return fuzz.New().RandSource(rand.NewSource(seed)).NilChance(0).NumElements(1, 2).MaxDepth(64).Funcs(
		func(tm *metav1.Time, c fuzz.Continue) {
			*tm = metav1.NewTime(time.Unix(c.Int63n(4e9), 0).UTC())
		},
		func(tm *metav1.MicroTime, c fuzz.Continue) {
			*tm = metav1.NewMicroTime(time.Unix(c.Int63n(4e9), c.Int63n(1e9)/1e3*1e3).UTC())
		},
		func(raw *runtime.RawExtension, c fuzz.Continue) {
			raw.Raw, _ = json.Marshal(map[string]string{"k": c.RandString()})
		},
		func(j *[]byte, c fuzz.Continue) { // bytes fields hold JSON (values, patches)
			b, _ := json.Marshal(map[string]string{"k": c.RandString()})
			*j = b
		},
	)
}

// clearUnrecognized empties the XXX_ bookkeeping fields of golang/protobuf-style messages, which hold raw wire
// bytes, not values: the filler would put garbage there.
func clearUnrecognized(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			clearUnrecognized(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if name := v.Type().Field(i).Name; strings.HasPrefix(name, "XXX_") {
				if f.CanSet() {
					f.Set(reflect.Zero(f.Type()))
				}
				continue
			}
			if f.CanSet() {
				clearUnrecognized(f)
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			clearUnrecognized(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			clearUnrecognized(e)
			v.SetMapIndex(k, e)
		}
	}
}

// message is a gogo-generated message (both Argo CD's and the copy's are).
type message interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// TestTheCopySpeaksArgoCDsWireFormat fills Argo CD's own messages at random, encodes them with Argo CD's code, decodes
// them with the copy's and encodes them again: the bytes must be the same, and so must the JSON (the snapshot
// reader's input). Every message syncmedic receives or sends is covered.
func TestTheCopySpeaksArgoCDsWireFormat(t *testing.T) {
	cases := []struct {
		name     string
		upstream func() message
		copy     func() message
	}{
		{"an Application", func() message { return &upstream.Application{} }, func() message { return &v1alpha1.Application{} }},
		{"an ApplicationList", func() message { return &upstream.ApplicationList{} }, func() message { return &v1alpha1.ApplicationList{} }},
		{"a watch event", func() message { return &upstream.ApplicationWatchEvent{} }, func() message { return &v1alpha1.ApplicationWatchEvent{} }},
		{"a resource tree", func() message { return &upstream.ApplicationTree{} }, func() message { return &v1alpha1.ApplicationTree{} }},
		{"an AppProject", func() message { return &upstream.AppProject{} }, func() message { return &v1alpha1.AppProject{} }},
		{"an application query", func() message { return &upstreamapp.ApplicationQuery{} }, func() message { return &application.ApplicationQuery{} }},
		{"a resources query", func() message { return &upstreamapp.ResourcesQuery{} }, func() message { return &application.ResourcesQuery{} }},
		{"a resource request", func() message { return &upstreamapp.ApplicationResourceRequest{} }, func() message { return &application.ApplicationResourceRequest{} }},
		{"a resource response", func() message { return &upstreamapp.ApplicationResourceResponse{} }, func() message { return &application.ApplicationResourceResponse{} }},
		{"a resource patch request", func() message { return &upstreamapp.ApplicationResourcePatchRequest{} }, func() message { return &application.ApplicationResourcePatchRequest{} }},
		{"a sync request", func() message { return &upstreamapp.ApplicationSyncRequest{} }, func() message { return &application.ApplicationSyncRequest{} }},
		{"a terminate request", func() message { return &upstreamapp.OperationTerminateRequest{} }, func() message { return &application.OperationTerminateRequest{} }},
		{"a sync windows query", func() message { return &upstreamapp.ApplicationSyncWindowsQuery{} }, func() message { return &application.ApplicationSyncWindowsQuery{} }},
		{"a sync windows response", func() message { return &upstreamapp.ApplicationSyncWindowsResponse{} }, func() message { return &application.ApplicationSyncWindowsResponse{} }},
	}
	for _, c := range cases {
		t.Run(c.name+" decodes and re-encodes byte for byte", func(t *testing.T) {
			for seed := int64(0); seed < 50; seed++ {
				in := c.upstream()
				filler(seed).Fuzz(in)
				clearUnrecognized(reflect.ValueOf(in))
				want, err := in.Marshal()
				if err != nil {
					t.Fatalf("seed %d: Argo CD's Marshal: %v", seed, err)
				}
				out := c.copy()
				if err := out.Unmarshal(want); err != nil {
					t.Fatalf("seed %d: the copy's Unmarshal: %v", seed, err)
				}
				got, err := out.Marshal()
				if err != nil {
					t.Fatalf("seed %d: the copy's Marshal: %v", seed, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("seed %d: the copy encodes %d bytes where Argo CD encodes %d", seed, len(got), len(want))
				}
				// JSON (what `argocd app get -o json` prints and the snapshot reader reads): Argo CD's JSON, read by the
				// copy and printed again, is the same.
				wantJSON, err := json.Marshal(in)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				fromJSON := c.copy()
				if err := json.Unmarshal(wantJSON, fromJSON); err != nil {
					t.Fatalf("seed %d: the copy cannot read Argo CD's JSON: %v", seed, err)
				}
				gotJSON, err := json.Marshal(fromJSON)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if !bytes.Equal(gotJSON, wantJSON) {
					t.Fatalf("seed %d: JSON differs:\ncopy:    %s\nArgo CD: %s", seed, gotJSON, wantJSON)
				}
				// And back: what the copy encodes, Argo CD reads as it wrote it.
				back := c.upstream()
				if err := back.Unmarshal(got); err != nil {
					t.Fatalf("seed %d: Argo CD's Unmarshal of the copy's bytes: %v", seed, err)
				}
				if again, err := back.Marshal(); err != nil || !bytes.Equal(again, want) {
					t.Fatalf("seed %d: Argo CD reads the copy's bytes as something else (%v)", seed, err)
				}
			}
		})
	}
}
