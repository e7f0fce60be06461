//go:build linux

package agent

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// TestForwarder speaks portforward.k8s.io to the forwarder as kubectl
// does (an error and a data stream per connection, paired by requestID),
// here from the agent's own network namespace, over both of kubectl's
// transports (SPDY, and SPDY tunnelled through a WebSocket, which the API
// server passes through): several connections at once reach their port,
// and a closed port is reported on the error stream in kubelet's words.
func TestForwarder(t *testing.T) {
	for _, tc := range []struct {
		name string
		dial func(t *testing.T, base string) httpstream.Connection
	}{
		{"SPDY", dialForward},
		{"SPDY through a WebSocket", dialTunnel},
	} {
		t.Run(tc.name, func(t *testing.T) { checkForwarder(t, startForwarderVia(t, 0, tc.dial)) })
	}
}

// checkForwarder runs TestForwarder's checks through conn.
func checkForwarder(t *testing.T, conn httpstream.Connection) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	echoPort := echo.Addr().(*net.TCPAddr).Port
	type result struct {
		id        int
		got, errs []byte
	}
	results := make(chan result, 5)
	for id := range 5 {
		go func() {
			data, errs := openPair(t, conn, id, echoPort)
			fmt.Fprintf(data, "hello %d", id)
			data.Close() // half-close: the echo ends, the forwarder closes its side
			got, _ := io.ReadAll(data)
			e, _ := io.ReadAll(errs)
			results <- result{id, got, e}
		}()
	}
	for range 5 {
		r := <-results
		if want := fmt.Sprintf("hello %d", r.id); string(r.got) != want || len(r.errs) > 0 {
			t.Errorf("connection %d: got %q, error stream %q; want %q and no error", r.id, r.got, r.errs, want)
		}
	}

	_, errs := openPair(t, conn, 9, closedPort)
	e, _ := io.ReadAll(errs)
	if want := fmt.Sprintf("error forwarding port %d to pod web, uid u1: ", closedPort); !strings.HasPrefix(string(e), want) || !strings.Contains(string(e), "connection refused") {
		t.Errorf("closed port: error stream %q, want %q ... connection refused", e, want)
	}
}

// TestForwarderEndsConnectionThePodClosed pins a connection that the pod
// closed staying open until the client closed its side: a client that
// waits for the error stream first (kubectl before 1.31) hung. The
// forwarder ends it shortly after, as containerd does.
func TestForwarderEndsConnectionThePodClosed(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("bye"))
			c.Close()
		}
	}()
	conn := startForwarder(t, 0)
	data, errs := openPair(t, conn, 1, srv.Addr().(*net.TCPAddr).Port)
	ended := make(chan []byte)
	go func() {
		got, _ := io.ReadAll(data)
		io.ReadAll(errs) // the client's data stream stays open
		ended <- got
	}()
	select {
	case got := <-ended:
		if string(got) != "bye" {
			t.Errorf("got %q, want %q", got, "bye")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the error stream is still open: the connection the pod closed never ended")
	}
}

// TestForwarderDropsUnfitStreams pins half-open connections kept for the
// life of the session and a data stream paired with an error stream of
// another port: a stream whose partner does not come within the creation
// timeout is reset, and a pair whose ports differ is reset, not
// forwarded to the first stream's port.
func TestForwarderDropsUnfitStreams(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	echoPort := echo.Addr().(*net.TCPAddr).Port
	conn := startForwarder(t, 100*time.Millisecond)
	h := http.Header{}
	h.Set(corev1.PortHeader, strconv.Itoa(echoPort))
	h.Set(corev1.PortForwardRequestIDHeader, "lonely")
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	lonely, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan string, 2)
	go func() { io.ReadAll(lonely); ended <- "lonely error stream" }()

	h.Set(corev1.PortForwardRequestIDHeader, "mismatch")
	errs, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	h.Set(corev1.PortHeader, strconv.Itoa(echoPort+1))
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	data.Write([]byte("hello"))
	data.Close()
	if got, _ := io.ReadAll(data); len(got) > 0 {
		t.Errorf("data stream for port %d paired with an error stream for port %d: got %q forwarded, want it reset", echoPort+1, echoPort, got)
	}
	go func() { io.ReadAll(errs); ended <- "mismatched error stream" }()
	for range 2 {
		select {
		case what := <-ended:
			t.Logf("%s reset", what)
		case <-time.After(30 * time.Second):
			t.Fatal("a stream that cannot be forwarded is still open")
		}
	}
}

// startForwarder serves one port-forward session of pod demo/web and
// returns the client's connection to it.
func startForwarder(t *testing.T, creationTimeout time.Duration) httpstream.Connection {
	t.Helper()
	return startForwarderVia(t, creationTimeout, dialForward)
}

// startForwarderVia is startForwarder with the client's dialler.
func startForwarderVia(t *testing.T, creationTimeout time.Duration, dial func(*testing.T, string) httpstream.Connection) httpstream.Connection {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "u1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := upgradeSPDY(w, r, []string{portForwardV1})
		if s == nil {
			return
		}
		defer s.close()
		(&forwarder{sess: s, pod: pod, pending: map[string]*streamPair{}, creationTimeout: creationTimeout}).run(r.Context())
	}))
	conn := dial(t, srv.URL)
	t.Cleanup(func() { conn.Close(); srv.Close() })
	return conn
}

func dialForward(t *testing.T, base string) httpstream.Connection {
	t.Helper()
	rt, upgrader, err := spdy.RoundTripperFor(&rest.Config{Host: base})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base + "/portForward/demo/web")
	conn, proto, err := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, "POST", u).Dial(portForwardV1)
	if err != nil || proto != portForwardV1 {
		t.Fatalf("dial: %v (protocol %q)", err, proto)
	}
	return conn
}

// dialTunnel opens a session as kubectl 1.30+ does: SPDY tunnelled
// through a WebSocket.
func dialTunnel(t *testing.T, base string) httpstream.Connection {
	t.Helper()
	u, _ := url.Parse(base + "/portForward/demo/web")
	d, err := portforward.NewSPDYOverWebsocketDialer(u, &rest.Config{Host: base})
	if err != nil {
		t.Fatal(err)
	}
	conn, proto, err := d.Dial(portForwardV1)
	if err != nil || proto != portForwardV1 {
		t.Fatalf("dial: %v (protocol %q)", err, proto)
	}
	return conn
}

// openPair opens one connection's streams as kubectl does: the error
// stream first (which only the agent writes), then the data stream.
func openPair(t *testing.T, conn httpstream.Connection, id, port int) (data, errs httpstream.Stream) {
	h := http.Header{}
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.Itoa(id))
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	errs, err := conn.CreateStream(h)
	if err != nil {
		t.Error(err)
		return nil, nil
	}
	errs.Close()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err = conn.CreateStream(h)
	if err != nil {
		t.Error(err)
	}
	return data, errs
}

// countingWriter records the size of each write.
type countingWriter struct{ writes []int }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return len(p), nil
}

// TestCopyFromPodGrowsItsReads: a connection's first MiB goes in reads of
// 32 KiB (a dropped connection puts little into the shared session), the
// rest in 256 KiB (fewer frames per byte), whatever the source offers.
func TestCopyFromPodGrowsItsReads(t *testing.T) {
	src := strings.NewReader(strings.Repeat("x", 3<<20))
	var dst countingWriter
	if err := copyFromPod(&dst, src); err != nil {
		t.Fatal(err)
	}
	var want []int
	for range 32 {
		want = append(want, 32<<10)
	}
	for range 8 {
		want = append(want, 256<<10)
	}
	if fmt.Sprint(dst.writes) != fmt.Sprint(want) {
		t.Errorf("writes: got %v, want %v", dst.writes, want)
	}
}
