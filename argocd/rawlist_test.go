package argocd

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/syncmedic/syncmedic/internal/argoapi/application"
)

// TestListAndWatchReadAutoSyncDisabled serves List and Watch replies as Argo CD v3.1+ encodes them (one application
// with automated.enabled: false, one auto-synced) from a gRPC server that answers with those bytes, and reads them
// through APIClient: the application whose auto-sync is off comes back without an automated policy, from List and
// from Watch alike, so the watcher and the scan do not take it for auto-synced.
func TestListAndWatchReadAutoSyncDisabled(t *testing.T) {
	off, on := false, true
	disabled, enabled := appBytes(t, &off), appBytes(t, &on)
	list := protowire.AppendBytes(protowire.AppendTag(nil, fieldListItems, protowire.BytesType), disabled)
	list = protowire.AppendBytes(protowire.AppendTag(list, fieldListItems, protowire.BytesType), enabled)
	event := func(app []byte) []byte {
		ev := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "MODIFIED")
		return protowire.AppendBytes(protowire.AppendTag(ev, fieldWatchEventApplication, protowire.BytesType), app)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawReplyCodec{}), grpc.UnknownServiceHandler(func(_ any, s grpc.ServerStream) error {
		var req []byte
		if err := s.RecvMsg(&req); err != nil {
			return err
		}
		method, _ := grpc.MethodFromServerStream(s)
		switch method {
		case methodApplicationList:
			return s.SendMsg(&list)
		case methodApplicationWatch:
			for _, app := range [][]byte{disabled, enabled} {
				b := event(app)
				if err := s.SendMsg(&b); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	c, err := dial(ClientOptions{ServerAddr: lis.Addr().String(), PlainText: true}, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	got, err := c.List(context.Background(), &application.ApplicationQuery{})
	require.NoError(t, err)
	require.Len(t, got.Items, 2)
	require.Nil(t, got.Items[0].Spec.SyncPolicy.Automated, "List: enabled: false is no auto-sync")
	require.NotNil(t, got.Items[1].Spec.SyncPolicy.Automated, "List: enabled: true stays auto-synced")

	w, err := c.Watch(context.Background(), &application.ApplicationQuery{})
	require.NoError(t, err)
	first, err := w.Recv()
	require.NoError(t, err)
	require.Equal(t, "MODIFIED", string(first.Type))
	require.Equal(t, "shop", first.Application.Name)
	require.Nil(t, first.Application.Spec.SyncPolicy.Automated, "Watch: enabled: false is no auto-sync")
	second, err := w.Recv()
	require.NoError(t, err)
	require.NotNil(t, second.Application.Spec.SyncPolicy.Automated, "Watch: enabled: true stays auto-synced")
}
