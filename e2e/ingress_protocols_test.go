package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// testWebSocketAndGRPC: a WebSocket upgraded through the Ingress to the
// backends' echo, and a gRPC call over TLS and HTTP/2 to a Service whose
// port says appProtocol kubernetes.io/h2c (the controller speaks cleartext
// HTTP/2 to its endpoints).
func (ib *ingressBed) testWebSocketAndGRPC(t *testing.T) {
	apply(t, ib.server, ingress("protocols", rule("ws.test", path{"/", prefix, "alpha"}), rule("grpc.test", path{"/", prefix, "grpc"}),
		rule("grpc-native.test", path{"/", prefix, "grpc-native"})))
	eventuallyWithin(t, 30*time.Second, "the Ingress protocols served", func() (bool, string) {
		a := ib.curl("http://ws.test/")
		return a.code == 200 && serviceOf(a.backend) == "alpha", fmt.Sprintf("GET http://ws.test/: got %v, want 200 from alpha", a)
	})

	t.Run("websocket echo", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := ib.dialNode(ctx, "tcp", ":80")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		cfg, err := websocket.NewConfig("ws://ws.test/ws", "http://ws.test/")
		if err != nil {
			t.Fatal(err)
		}
		ws, err := websocket.NewClient(cfg, conn)
		if err != nil {
			t.Fatalf("WebSocket handshake with ws://ws.test/ws through the Ingress: %v", err)
		}
		for _, msg := range []string{"hello", "through the ingress", "third"} {
			if err := websocket.Message.Send(ws, msg); err != nil {
				t.Fatalf("send %q: %v", msg, err)
			}
			var got string
			if err := websocket.Message.Receive(ws, &got); err != nil {
				t.Fatalf("receive the echo of %q: %v", msg, err)
			}
			if got != msg {
				t.Errorf("WebSocket echo: got %q, want %q", got, msg)
			}
		}
	})

	for host, appProtocol := range map[string]string{"grpc.test": "kubernetes.io/h2c", "grpc-native.test": "grpc"} {
		t.Run("grpc health check to a port of appProtocol "+appProtocol, func(t *testing.T) {
			ib.checkGRPC(t, host)
		})
	}
}

// checkGRPC makes a gRPC health check through the Ingress to host, over
// TLS with the controller's certificate for it unverified.
func (ib *ingressBed) checkGRPC(t *testing.T, host string) {
	creds := credentials.NewTLS(&tls.Config{ServerName: host, InsecureSkipVerify: true})
	conn, err := grpc.NewClient("passthrough:///"+host+":443", grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return ib.dialNode(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	eventuallyWithin(t, 30*time.Second, "a gRPC health check through the Ingress to "+host, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return false, fmt.Sprintf("grpc.health.v1.Health/Check to %s:443: %v", host, err)
		}
		return resp.Status == healthpb.HealthCheckResponse_SERVING, fmt.Sprintf("got status %v, want SERVING", resp.Status)
	})
}
