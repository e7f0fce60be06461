package ingress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"portal.dev/portal/ingress/route"
	"portal.dev/portal/internal/testcert"
)

func TestWebSocketEcho(t *testing.T) {
	ws := httptest.NewServer(websocket.Handler(func(c *websocket.Conn) {
		var msg string
		for websocket.Message.Receive(c, &msg) == nil {
			websocket.Message.Send(c, "echo: "+msg)
		}
	}))
	t.Cleanup(ws.Close)
	tb := newTestBed(t, DefaultOptions())
	tb.backend("ws.com", route.Match{}, addr(ws))

	conf, err := websocket.NewConfig("ws://ws.com/chat", "http://ws.com/")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", tb.http)
	if err != nil {
		t.Fatal(err)
	}
	c, err := websocket.NewClient(conf, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, msg := range []string{"hello", "again"} {
		if err := websocket.Message.Send(c, msg); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := websocket.Message.Receive(c, &got); err != nil {
			t.Fatal(err)
		}
		if want := "echo: " + msg; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

// A gRPC client without TLS reaches a gRPC backend (appProtocol grpc,
// so h2c) through the plain listener, trailers and all.
func TestGRPCHealthCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("shop", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)

	tb := newTestBed(t, DefaultOptions())
	b := tb.backend("grpc.com", route.Match{}, ln.Addr().String())
	b.Protocol = route.H2C

	conn, err := grpc.NewClient(tb.http, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.com"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := healthpb.NewHealthClient(conn)
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("got %v, want SERVING", resp.Status)
	}
	// A status in the trailers: the unknown service's NOT_FOUND.
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "other"})
	if err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("got %v, want code NotFound", err)
	}
}

func TestSNIAndHTTP2(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	tb.routes.certs = map[string]*tls.Certificate{"a.com": testcert.SelfSigned(t, "a.com").TLS, "b.com": testcert.SelfSigned(t, "b.com").TLS}
	tb.backend("a.com", route.Match{}, addr(echo(t, "a")))
	for _, tc := range []struct{ serverName, wantCN string }{
		{"a.com", "a.com"},
		{"B.com", "b.com"},
		{"unknown.com", defaultCommonName},
		{"", defaultCommonName},
	} {
		t.Run("server name "+tc.serverName, func(t *testing.T) {
			c, err := tls.Dial("tcp", tb.https, &tls.Config{ServerName: tc.serverName, InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			st := c.ConnectionState()
			if got := st.PeerCertificates[0].Subject.CommonName; got != tc.wantCN {
				t.Errorf("got certificate %q, want %q", got, tc.wantCN)
			}
			if st.NegotiatedProtocol != "h2" {
				t.Errorf("got protocol %q, want h2", st.NegotiatedProtocol)
			}
		})
	}
	t.Run("request over HTTP/2", func(t *testing.T) {
		client := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true,
			TLSClientConfig: &tls.Config{ServerName: "a.com", InsecureSkipVerify: true}}}
		req, _ := http.NewRequest("GET", "https://"+tb.https+"/x", nil)
		req.Host = "a.com"
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got := body(t, resp)
		if resp.ProtoMajor != 2 || !strings.HasPrefix(got, "a GET /x") || !strings.Contains(got, "proto=https") {
			t.Errorf("got %s %q, want HTTP/2 from backend a with proto=https", resp.Proto, got)
		}
	})
}

// A request body that streams on after the response began (gRPC's
// client and bidirectional streams) keeps streaming through the proxy.
func TestFullDuplexStream(t *testing.T) {
	srv := &http.Server{Protocols: new(http.Protocols), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			fmt.Fprintf(w, "echo %s\n", sc.Text())
			w.(http.Flusher).Flush()
		}
	})}
	srv.Protocols.SetUnencryptedHTTP2(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	tb := newTestBed(t, DefaultOptions())
	b := tb.backend("stream.com", route.Match{}, ln.Addr().String())
	b.Protocol = route.H2C

	client := &http.Client{Transport: &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return net.Dial(network, addr)
		}}}
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest("POST", "http://"+tb.http+"/stream", pr)
	req.Host = "stream.com"
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	for _, msg := range []string{"one", "two", "three"} {
		fmt.Fprintf(pw, "%s\n", msg)
		got, err := lines.ReadString('\n')
		if want := "echo " + msg + "\n"; err != nil || got != want {
			t.Fatalf("got %q (%v), want %q", got, err, want)
		}
	}
}
