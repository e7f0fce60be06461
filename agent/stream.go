//go:build linux

package agent

import (
	"encoding/json"
	"net/http"
	"runtime/pprof"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"portal.dev/portal/agent/wstunnel"
)

const (
	// streamIdleTimeout ends a session nobody has used for this long, as
	// kubelet's streaming server does.
	streamIdleTimeout = 4 * time.Hour
	// streamCreationTimeout bounds how long a client may take to open the
	// streams it asked for.
	streamCreationTimeout = 30 * time.Second
	// streamPingPeriod keeps idle sessions alive through middleboxes.
	streamPingPeriod = 5 * time.Minute
)

// spdySession is one upgraded SPDY connection and the streams its client
// opens, delivered on streams until the session ends.
type spdySession struct {
	conn    httpstream.Connection
	streams chan newStream
	done    chan struct{}
}

// newStream is a stream the client opened. Until replySent is closed the
// client has not been told the stream exists: writing to or resetting it
// before then makes the client's open fail ("Stream reset").
type newStream struct {
	httpstream.Stream
	replySent <-chan struct{}
}

// upgradeSPDY negotiates one of protocols with the client and upgrades the
// request to SPDY, or to SPDY tunnelled through a WebSocket when the
// client asks for that (kubectl's port-forward since 1.30, which the API
// server then passes through unchanged). When it returns nil it has
// answered the request itself (no common protocol, not an upgrade
// request). close must be called when the session ends.
func upgradeSPDY(w http.ResponseWriter, r *http.Request, protocols []string) *spdySession {
	s := &spdySession{streams: make(chan newStream), done: make(chan struct{})}
	handler := func(st httpstream.Stream, replySent <-chan struct{}) error {
		select {
		case s.streams <- newStream{st, replySent}:
		case <-s.done:
			st.Reset()
		}
		return nil
	}
	if wstunnel.IsRequest(r) {
		conn, err := wstunnel.Upgrade(w, r, protocols)
		if err != nil {
			return nil
		}
		if s.conn, err = spdy.NewServerConnectionWithPings(conn, handler, streamPingPeriod); err != nil {
			conn.Close()
			return nil
		}
	} else {
		proto, err := httpstream.Handshake(r, w, protocols)
		if err != nil {
			return nil
		}
		if proto == "" {
			writeStatus(w, http.StatusBadRequest, "unable to upgrade: the client named no stream protocol; supported: "+protocols[0])
			return nil
		}
		s.conn = spdy.NewResponseUpgraderWithPings(streamPingPeriod).UpgradeResponse(w, r, handler)
		if s.conn == nil {
			return nil
		}
	}
	s.conn.SetIdleTimeout(streamIdleTimeout)
	return s
}

// close ends the session: streams still arriving are reset, the
// connection closed.
func (s *spdySession) close() {
	close(s.done)
	s.conn.Close()
}

// writeStatus answers a request that could not be upgraded with a Status,
// which client-go shows as "unable to upgrade connection: MESSAGE".
func writeStatus(w http.ResponseWriter, code int, msg string) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Code: int32(code)}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(st)
}

// streamType is the kind of stream the client opened (stdin, data...).
func streamType(st httpstream.Stream) string { return st.Headers().Get(corev1.StreamType) }

// addStreamRoutes adds the streaming endpoints kubelet serves to the API
// server (exec, attach, port-forward), the diagnostics nodes/proxy reaches
// and the resource metrics the API server's metrics scraper reads.
func (a *Agent) addStreamRoutes(mux *http.ServeMux) {
	for _, m := range []string{"GET", "POST"} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", a.serveExec)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", a.serveAttach)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}", a.servePortForward)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("GET /metrics/resource", a.serveResourceMetrics)
	// The goroutine profile lets a test (or an operator) see that
	// sessions leave nothing behind.
	mux.HandleFunc("GET /debug/pprof/goroutine", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		pprof.Lookup("goroutine").WriteTo(w, 1)
	})
}
