package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	versionpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/version"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"k8s.io/apimachinery/pkg/watch"
)

// serverStats are the calls the fake argocd-server answered: per method, and (for calls naming an application)
// per kind of application. Watch is counted too, separately from the rest.
type serverStats struct {
	Methods map[string]int64 `json:"methods"`
	ByKind  map[string]int64 `json:"byKind"`
	Watches int64            `json:"watches"`
}

// appServer is Argo CD's generated ApplicationService (and VersionService) over the fixture: Watch sends every
// application as ADDED (as argocd-server does without a resourceVersion) and then the burst of updates.
type appServer struct {
	application.UnimplementedApplicationServiceServer
	versionpkg.UnimplementedVersionServiceServer
	fx     *fixture
	byName map[string]*v1alpha1.Application
	now    time.Time

	mu    sync.Mutex
	stats serverStats
}

func newAppServer(fx *fixture, now time.Time) *appServer {
	s := &appServer{fx: fx, byName: map[string]*v1alpha1.Application{}, now: now}
	for i := range fx.apps {
		s.byName[fx.apps[i].Name] = &fx.apps[i]
	}
	s.reset()
	return s
}

func (s *appServer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = serverStats{Methods: map[string]int64{}, ByKind: map[string]int64{}}
}

func (s *appServer) snapshot() serverStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := serverStats{Methods: map[string]int64{}, ByKind: map[string]int64{}, Watches: s.stats.Watches}
	for k, v := range s.stats.Methods {
		out.Methods[k] = v
	}
	for k, v := range s.stats.ByKind {
		out.ByKind[k] = v
	}
	return out
}

// count is a unary interceptor: every unary call is counted, implemented or not.
func (s *appServer) count(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	kind := "none"
	if name := appNameOf(req); name != "" {
		kind = kindName(s.fx.kinds[name])
	}
	s.mu.Lock()
	s.stats.Methods[method]++
	s.stats.ByKind[kind]++
	s.mu.Unlock()
	return h(ctx, req)
}

// countStreams counts streams; Watch separately.
func (s *appServer) countStreams(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	s.mu.Lock()
	if method == "Watch" {
		s.stats.Watches++
	} else {
		s.stats.Methods[method]++
		s.stats.ByKind["none"]++
	}
	s.mu.Unlock()
	return h(srv, ss)
}

func appNameOf(req any) string {
	switch r := req.(type) {
	case *application.ApplicationQuery:
		return r.GetName()
	case *application.ResourcesQuery:
		return r.GetApplicationName()
	case *application.ApplicationResourceRequest:
		return r.GetName()
	case *application.ApplicationResourcePatchRequest:
		return r.GetName()
	case *application.ApplicationSyncRequest:
		return r.GetName()
	case *application.OperationTerminateRequest:
		return r.GetName()
	}
	return ""
}

func kindName(k appKind) string {
	return [...]string{"healthy", "hooked", "stuck"}[k]
}

// Watch streams every application as ADDED, then the updates, then waits for the client to go.
func (s *appServer) Watch(q *application.ApplicationQuery, ws application.ApplicationService_WatchServer) error {
	// As argocd-server (server/application Watch): every application as ADDED first, unless the query gives a
	// resourceVersion (and no name).
	for i := range s.fx.apps {
		if q.GetResourceVersion() != "" && q.GetName() == "" {
			break
		}
		if err := ws.Send(&v1alpha1.ApplicationWatchEvent{Type: watch.Added, Application: s.fx.apps[i]}); err != nil {
			return err
		}
	}
	for i := range s.fx.updates {
		if err := ws.Send(&s.fx.updates[i]); err != nil {
			return err
		}
	}
	<-ws.Context().Done()
	return nil
}

// List returns every application.
func (s *appServer) List(context.Context, *application.ApplicationQuery) (*v1alpha1.ApplicationList, error) {
	l := &v1alpha1.ApplicationList{Items: s.fx.apps}
	l.ResourceVersion = fmt.Sprint(1000 + len(s.fx.apps))
	return l, nil
}

// Get returns one application.
func (s *appServer) Get(_ context.Context, q *application.ApplicationQuery) (*v1alpha1.Application, error) {
	if a := s.byName[q.GetName()]; a != nil {
		return a, nil
	}
	return nil, status.Errorf(codes.NotFound, "applications.argoproj.io %q not found", q.GetName())
}

// ResourceTree returns the managed resources (and a ReplicaSet and Pod under the Deployment); a stuck application's
// tree also holds its hook Job, which is no managed resource.
func (s *appServer) ResourceTree(_ context.Context, q *application.ResourcesQuery) (*v1alpha1.ApplicationTree, error) {
	a := s.byName[q.GetApplicationName()]
	if a == nil {
		return nil, status.Errorf(codes.NotFound, "applications.argoproj.io %q not found", q.GetApplicationName())
	}
	tree := &v1alpha1.ApplicationTree{}
	for _, r := range a.Status.Resources {
		ref := v1alpha1.ResourceRef{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: r.Name + "-uid"}
		tree.Nodes = append(tree.Nodes, v1alpha1.ResourceNode{ResourceRef: ref, Health: r.Health})
		if r.Kind == "Deployment" {
			rs := v1alpha1.ResourceRef{Group: "apps", Version: "v1", Kind: "ReplicaSet", Namespace: r.Namespace, Name: r.Name + "-7d9f8b6c5", UID: "rs-uid"}
			tree.Nodes = append(tree.Nodes, v1alpha1.ResourceNode{ResourceRef: rs, ParentRefs: []v1alpha1.ResourceRef{ref}},
				v1alpha1.ResourceNode{ResourceRef: v1alpha1.ResourceRef{Version: "v1", Kind: "Pod", Namespace: r.Namespace, Name: r.Name + "-7d9f8b6c5-x2x4q"}, ParentRefs: []v1alpha1.ResourceRef{rs}})
		}
	}
	if s.fx.kinds[a.Name] == stuck {
		tree.Nodes = append(tree.Nodes, v1alpha1.ResourceNode{ResourceRef: v1alpha1.ResourceRef{Group: "batch", Version: "v1", Kind: "Job",
			Namespace: a.Spec.Destination.Namespace, Name: hookName(a.Name), UID: "job-uid"}})
	}
	return tree, nil
}

// GetResource returns a stuck application's hook Job; anything else is not found.
func (s *appServer) GetResource(_ context.Context, q *application.ApplicationResourceRequest) (*application.ApplicationResourceResponse, error) {
	a := s.byName[q.GetName()]
	if a != nil && s.fx.kinds[a.Name] == stuck && q.GetKind() == "Job" && q.GetResourceName() == hookName(a.Name) {
		m := hookManifest(a, s.now)
		return &application.ApplicationResourceResponse{Manifest: &m}, nil
	}
	return nil, status.Errorf(codes.NotFound, "%s %q not found", q.GetKind(), q.GetResourceName())
}

// Version answers like argocd-server of -server-version (v2.14.21 by default).
func (s *appServer) Version(context.Context, *emptypb.Empty) (*versionpkg.VersionMessage, error) {
	return &versionpkg.VersionMessage{Version: *serverVersion}, nil
}

// serveChild is the server process: it listens on loopback, prints "listening <addr>", then answers "stats" and
// "reset" lines on stdin with one JSON line (or "ok") on stdout until stdin closes.
func serveChild(apps, updates, stuckEvery, hookedEvery int) error {
	now := time.Now()
	srv := newAppServer(newFixture(apps, updates, stuckEvery, hookedEvery, now), now)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gs := grpc.NewServer(grpc.UnaryInterceptor(srv.count), grpc.StreamInterceptor(srv.countStreams), grpc.MaxSendMsgSize(1<<30))
	application.RegisterApplicationServiceServer(gs, srv)
	versionpkg.RegisterVersionServiceServer(gs, srv)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	fmt.Printf("listening %s\n", ln.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "stats":
			b, _ := json.Marshal(srv.snapshot())
			fmt.Println(string(b))
		case "reset":
			srv.reset()
			fmt.Println("ok")
		}
	}
	return sc.Err()
}
