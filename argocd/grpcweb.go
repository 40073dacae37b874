package argocd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// grpcWebTunnel carries gRPC calls over gRPC-web (HTTP/1.1 POSTs), for --argocd-grpc-web: ingresses and proxies that
// do not pass HTTP/2 end to end. It is what Argo CD's client does (pkg/apiclient/grpcproxy.go): a gRPC server on a
// private unix socket takes each call with its message as raw bytes and replays it as one gRPC-web request to
// argocd-server, whose response frames it streams back. Unary calls and server streams (Watch) both work this
// way; client streams are not used by syncmedic.
type grpcWebTunnel struct {
	socket string
	dir    string
	server *grpc.Server
	http   *http.Client
	base   string // scheme://host:port[/root path]
	once   sync.Once
}

// gRPC-web framing: a flag byte (0x80 marks the trailer frame) and a 4-byte big-endian length.
const (
	grpcWebHeaderLength = 5
	grpcWebTrailerFlag  = 0x80
)

// rawCodec passes messages through as bytes: the tunnel never decodes them.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func startGRPCWebTunnel(o ClientOptions) (*grpcWebTunnel, error) {
	scheme, transport := "https", &http.Transport{Proxy: http.ProxyFromEnvironment}
	if o.PlainText {
		scheme = "http"
	} else {
		cfg, err := tlsConfig(o)
		if err != nil {
			return nil, err
		}
		transport.TLSClientConfig = cfg
	}
	base := scheme + "://" + serverAddr(o.ServerAddr)
	if root := strings.Trim(o.GRPCWebRootPath, "/"); root != "" {
		base += "/" + root
	}
	dir, err := os.MkdirTemp("", "syncmedic-grpcweb-")
	if err != nil {
		return nil, err
	}
	t := &grpcWebTunnel{socket: filepath.Join(dir, "argocd.sock"), dir: dir, http: &http.Client{Transport: transport}, base: base}
	ln, err := net.Listen("unix", t.socket)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	t.server = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(t.forward))
	go func() { _ = t.server.Serve(ln) }()
	return t, nil
}

// Close stops the tunnel and removes its socket.
func (t *grpcWebTunnel) Close() error {
	t.once.Do(func() {
		t.server.Stop()
		t.http.CloseIdleConnections()
		_ = os.RemoveAll(t.dir)
	})
	return nil
}

// forward replays one call as a gRPC-web request and streams the response's messages back.
func (t *grpcWebTunnel) forward(_ any, stream grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return status.Error(codes.Internal, "gRPC-web tunnel: no method name on the call")
	}
	var msg []byte
	if err := stream.RecvMsg(&msg); err != nil {
		return err
	}
	frame := make([]byte, grpcWebHeaderLength, grpcWebHeaderLength+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	req, err := http.NewRequestWithContext(stream.Context(), http.MethodPost, t.base+method, bytes.NewReader(append(frame, msg...)))
	if err != nil {
		return err
	}
	md, _ := metadata.FromIncomingContext(stream.Context())
	for k, vs := range md {
		if strings.HasPrefix(k, ":") || k == "content-type" {
			continue
		}
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/grpc-web+proto")
	req.Header.Set("X-Grpc-Web", "1")
	resp, err := t.http.Do(req)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return status.Errorf(httpCode(resp.StatusCode), "gRPC-web %s %s: HTTP %d", req.Method, req.URL, resp.StatusCode)
	}
	if err := grpcStatus(resp.Header); err != nil { // a trailers-only response
		return err
	}
	header := make([]byte, grpcWebHeaderLength)
	for {
		if _, err := io.ReadFull(resp.Body, header); err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the server closed the stream after its last message, without trailers
			}
			return status.Error(codes.Unavailable, err.Error())
		}
		data := make([]byte, binary.BigEndian.Uint32(header[1:]))
		if _, err := io.ReadFull(resp.Body, data); err != nil {
			return status.Error(codes.Unavailable, err.Error())
		}
		if header[0]&grpcWebTrailerFlag != 0 {
			return grpcStatus(parseTrailer(data))
		}
		if err := stream.SendMsg(&data); err != nil {
			return err
		}
	}
}

// parseTrailer reads a gRPC-web trailer frame: HTTP/1-style "key: value" lines.
func parseTrailer(data []byte) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(string(data), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return h
}

// grpcStatus is the call's error from its grpc-status and grpc-message, nil when there is none or it is OK.
func grpcStatus(h http.Header) error {
	s := h.Get("Grpc-Status")
	if s == "" {
		return nil
	}
	code := codes.Unknown
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		code = codes.Code(n)
	}
	if code == codes.OK {
		return nil
	}
	return status.Error(code, h.Get("Grpc-Message"))
}

// httpCode maps an HTTP error status to a gRPC code as gRPC does for HTTP/2 responses (grpc/doc/http-grpc-status-mapping.md).
func httpCode(n int) codes.Code {
	switch n {
	case http.StatusBadRequest:
		return codes.Internal
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	return codes.Unknown
}
