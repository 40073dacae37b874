package argocd

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// Fields newer than the v2.14.21 API copy this module decodes with (internal/argoapi, generated): its decoder skips
// a field it does not know, so the replies that carry one are read from their wire bytes. The field numbers are
// Argo CD's (pkg/apis/application/v1alpha1/generated.proto, server/settings/settings.proto, v3.6.1).
const (
	// fieldApplicationSpec, fieldSpecSyncPolicy, fieldSyncPolicyAutomated and fieldAutomatedEnabled lead from an
	// Application to spec.syncPolicy.automated.enabled (v3.1+).
	fieldApplicationSpec     = 2
	fieldSpecSyncPolicy      = 4
	fieldSyncPolicyAutomated = 1
	fieldAutomatedEnabled    = 4
	// fieldListItems is ApplicationList.items; fieldWatchEventApplication is ApplicationWatchEvent.application.
	fieldListItems             = 2
	fieldWatchEventApplication = 2
	// fieldSyncWithReplaceAllowed is Settings.syncWithReplaceAllowed (v3.1+, argo-cd #22647).
	fieldSyncWithReplaceAllowed = 29
)

// The full gRPC methods read as bytes.
const (
	methodApplicationGet   = "/application.ApplicationService/Get"
	methodApplicationList  = "/application.ApplicationService/List"
	methodApplicationWatch = "/application.ApplicationService/Watch"
	methodSettingsGet      = "/cluster.SettingsService/Get"
)

// rawReplyCodec marshals requests with their generated Marshal (the API copy's gogo types) and keeps the reply as
// its wire bytes (*[]byte).
type rawReplyCodec struct{}

func (rawReplyCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *[]byte:
		return *m, nil
	case interface{ Marshal() ([]byte, error) }:
		return m.Marshal()
	}
	return nil, fmt.Errorf("rawReplyCodec: cannot encode %T", v)
}

func (rawReplyCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawReplyCodec: cannot decode into %T", v)
	}
	*b = append([]byte(nil), data...)
	return nil
}

// Name is empty so that the call's content-type stays "application/grpc": a forced codec's name becomes the content
// subtype ("application/grpc+proto"), and argocd-server's cmux sends only an exact "application/grpc" to its gRPC
// server — a new connection whose first call carried the subtype would reach its HTTP server and be reset.
func (rawReplyCodec) Name() string { return "" }

// Get reads the application like ApplicationService.Get, and keeps what the v2.14.21 API copy cannot carry: an
// automated sync policy with enabled: false (Argo CD v3.1+; ApplicationSets switch auto-sync off this way) comes back
// without the automated policy, which is how Argo CD itself reads it (SyncPolicy.IsAutomatedSyncEnabled): auto-sync
// is off, and argocd-server accepts a Sync naming any revision. Read as the decoded copy alone, such an application
// would pass for auto-synced, and terminate-and-resync would deploy the branch head instead of the operation's
// revision. The reply is the same message as the generated client's; only its decoding is done here.
func (c *APIClient) Get(ctx context.Context, in *application.ApplicationQuery, opts ...grpc.CallOption) (*v1alpha1.Application, error) {
	var raw []byte
	if err := c.conn.Invoke(ctx, methodApplicationGet, in, &raw, append(opts, grpc.ForceCodec(rawReplyCodec{}))...); err != nil {
		return nil, err
	}
	app := &v1alpha1.Application{}
	if err := app.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("argocd %s: decoding the application: %w", CallGet, err)
	}
	if err := dropDisabledAutoSync(app, raw); err != nil {
		return nil, fmt.Errorf("argocd %s %s: %w", CallGet, app.Name, err)
	}
	return app, nil
}

// dropDisabledAutoSync removes app's automated sync policy when raw, app's wire bytes, sets
// spec.syncPolicy.automated.enabled to false (see Get).
func dropDisabledAutoSync(app *v1alpha1.Application, raw []byte) error {
	off, err := AutoSyncDisabled(raw)
	if err != nil {
		return fmt.Errorf("decoding spec.syncPolicy.automated.enabled: %w", err)
	}
	if off && app.Spec.SyncPolicy != nil {
		app.Spec.SyncPolicy.Automated = nil
	}
	return nil
}

// List reads the applications like ApplicationService.List, each with an automated policy whose enabled is false
// read as no automated policy (see Get): the watcher and the scan judge auto-sync from what List and Watch return.
func (c *APIClient) List(ctx context.Context, in *application.ApplicationQuery, opts ...grpc.CallOption) (*v1alpha1.ApplicationList, error) {
	var raw []byte
	if err := c.conn.Invoke(ctx, methodApplicationList, in, &raw, append(opts, grpc.ForceCodec(rawReplyCodec{}))...); err != nil {
		return nil, err
	}
	list := &v1alpha1.ApplicationList{}
	if err := list.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("argocd %s: decoding the application list: %w", CallList, err)
	}
	i := 0
	err := eachField(raw, func(n protowire.Number, _ protowire.Type, item []byte) error {
		if n != fieldListItems {
			return nil
		}
		if i < len(list.Items) {
			if err := dropDisabledAutoSync(&list.Items[i], item); err != nil {
				return fmt.Errorf("%s: %w", list.Items[i].Name, err)
			}
		}
		i++
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("argocd %s: %w", CallList, err)
	}
	return list, nil
}

// Watch opens ApplicationService.Watch like the generated client, and reads each event's application as Get does.
func (c *APIClient) Watch(ctx context.Context, in *application.ApplicationQuery, opts ...grpc.CallOption) (application.ApplicationService_WatchClient, error) {
	s, err := c.conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}, methodApplicationWatch,
		append(opts, grpc.ForceCodec(rawReplyCodec{}))...)
	if err != nil {
		return nil, err
	}
	if err := s.SendMsg(in); err != nil {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	return &rawWatchClient{ClientStream: s}, nil
}

// rawWatchClient is the Watch stream, decoding each event from its wire bytes.
type rawWatchClient struct{ grpc.ClientStream }

var _ application.ApplicationService_WatchClient = (*rawWatchClient)(nil)

func (w *rawWatchClient) Recv() (*v1alpha1.ApplicationWatchEvent, error) {
	var raw []byte
	if err := w.RecvMsg(&raw); err != nil {
		return nil, err
	}
	ev := &v1alpha1.ApplicationWatchEvent{}
	if err := ev.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("argocd Watch: decoding an event: %w", err)
	}
	app, ok, err := protoMessage(raw, fieldWatchEventApplication)
	if err == nil && ok {
		err = dropDisabledAutoSync(&ev.Application, app)
	}
	if err != nil {
		return nil, fmt.Errorf("argocd Watch %s: %w", ev.Application.Name, err)
	}
	return ev, nil
}

// SyncSettingsClient reads what argocd-server's settings say about the Syncs it accepts.
type SyncSettingsClient interface {
	// SyncWithReplaceAllowed is argocd-server's syncWithReplaceAllowed setting (ARGOCD_SYNC_WITH_REPLACE_ALLOWED,
	// server.sync.replace.allowed in argocd-cmd-params-cm): false when it refuses every Sync carrying Replace=true,
	// and also when the server does not publish it (before v3.1; v2 has no such setting).
	SyncWithReplaceAllowed(ctx context.Context) (bool, error)
}

var _ SyncSettingsClient = (*APIClient)(nil)

// SyncWithReplaceAllowed reads SettingsService.Get (public: argocd-server answers it without a login, with this
// field set either way).
func (c *APIClient) SyncWithReplaceAllowed(ctx context.Context) (bool, error) {
	req, raw := []byte{}, []byte(nil)
	if err := c.conn.Invoke(ctx, methodSettingsGet, &req, &raw, grpc.ForceCodec(rawReplyCodec{})); err != nil {
		return false, err
	}
	v, _, err := protoBool(raw, fieldSyncWithReplaceAllowed)
	if err != nil {
		return false, fmt.Errorf("argocd %s: decoding syncWithReplaceAllowed: %w", CallSettings, err)
	}
	return v, nil
}

// AutoSyncDisabled reports whether the wire bytes of an Application set spec.syncPolicy.automated.enabled to
// false (absent means enabled, as in Argo CD).
func AutoSyncDisabled(app []byte) (bool, error) {
	msg := app
	for _, f := range []protowire.Number{fieldApplicationSpec, fieldSpecSyncPolicy, fieldSyncPolicyAutomated} {
		sub, ok, err := protoMessage(msg, f)
		if err != nil || !ok {
			return false, err
		}
		msg = sub
	}
	enabled, set, err := protoBool(msg, fieldAutomatedEnabled)
	return set && !enabled, err
}

// protoMessage returns the last occurrence of the embedded message field num of msg (proto merges repeated
// occurrences of a message; Argo CD's encoder writes one).
func protoMessage(msg []byte, num protowire.Number) (out []byte, found bool, err error) {
	err = eachField(msg, func(n protowire.Number, t protowire.Type, v []byte) error {
		if n != num {
			return nil
		}
		if t != protowire.BytesType {
			return fmt.Errorf("field %d is not a message", num)
		}
		out, found = v, true
		return nil
	})
	return out, found, err
}

// protoBool returns the last value of the bool field num of msg, and whether it is set.
func protoBool(msg []byte, num protowire.Number) (val, set bool, err error) {
	err = eachField(msg, func(n protowire.Number, t protowire.Type, v []byte) error {
		if n != num {
			return nil
		}
		if t != protowire.VarintType {
			return fmt.Errorf("field %d is not a bool", num)
		}
		x, l := protowire.ConsumeVarint(v)
		if l < 0 {
			return protowire.ParseError(l)
		}
		val, set = x != 0, true
		return nil
	})
	return val, set, err
}

// eachField calls fn with each top-level field of msg: its number, wire type and value (the payload of a
// length-delimited field, the encoded varint or fixed value otherwise).
func eachField(msg []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		m := protowire.ConsumeFieldValue(num, typ, msg)
		if m < 0 {
			return protowire.ParseError(m)
		}
		v := msg[:m]
		if typ == protowire.BytesType {
			b, l := protowire.ConsumeBytes(v)
			if l < 0 {
				return protowire.ParseError(l)
			}
			v = b
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		msg = msg[m:]
	}
	return nil
}
