package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/net/websocket"
)

// ingressBackendEnv, set to a listen address, makes this test binary the
// HTTP backend of the Ingress tests instead of running tests (TestMain
// looks at it first). Pods run processes of the node's filesystem, and the
// node has no server that both names itself and echoes WebSockets, so the
// pods run this binary: one program, built with the tests, nothing to
// install.
//
// It answers every request with the pod's name (env POD_NAME) in the body
// and in X-Backend, so a test sees which Service a request was routed to,
// returns the Host and forwarding headers it got as X-Seen-<name>, and
// echoes WebSocket messages on /ws. It reads a request's body whole
// before it answers, as an upload handler does, and answers late when the
// query asks for it (?delay=3s), for the tests of timeouts. On SIGTERM it keeps serving for 3 s
// before it shuts down, as real servers drain: the endpoint leaves the
// EndpointSlice a moment after the pod starts terminating, and a request
// sent to it in that moment must still be answered.
const ingressBackendEnv = "PORTAL_E2E_INGRESS_BACKEND"

func serveIngressBackend(addr string) int {
	name := os.Getenv("POD_NAME")
	mux := http.NewServeMux()
	mux.Handle("/ws", websocket.Handler(func(ws *websocket.Conn) { io.Copy(ws, ws) }))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if d, err := time.ParseDuration(r.URL.Query().Get("delay")); err == nil {
			time.Sleep(d)
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		w.Header().Set("X-Backend", name)
		// What the proxy sent, for the tests of forwarded headers.
		w.Header().Set("X-Seen-Host", r.Host)
		for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Request-Id"} {
			w.Header().Set("X-Seen-"+h, r.Header.Get(h))
		}
		io.WriteString(w, name)
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	stopped := make(chan struct{})
	go func() {
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		<-term
		time.Sleep(3 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		close(stopped)
	}()
	fmt.Println("serving HTTP on", addr, "as", name)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	<-stopped
	return 0
}
