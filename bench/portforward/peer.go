package main

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"portal.dev/portal/agent/wstunnel"
)

// peer is the kubectl anchor's other end: an API server of its own that
// knows one running pod, web, and answers its port-forward with the file's
// bytes from memory, over either of kubectl's protocols. It does no
// second hop, so what kubectl moves through it is what kubectl alone can
// move: the bound a port-forward through Portal can reach.
type peer struct {
	srv     *httptest.Server
	payload []byte // 1 MiB, sent *sizeMiB times per download
}

// startPeer starts the peer on a TLS port of its own and writes a
// kubeconfig for it to kubeconfig.
func startPeer(kubeconfig string) (*peer, error) {
	p := &peer{payload: make([]byte, 1<<20)}
	rand.Read(p.payload)
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serveHTTP))
	p.srv.StartTLS()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: peer, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: peer, user: {token: anchor}}]
contexts: [{name: peer, context: {cluster: peer, user: peer, namespace: default}}]
current-context: peer
`, p.srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		p.srv.Close()
		return nil, err
	}
	return p, nil
}

// serveHTTP answers what kubectl port-forward pod/web asks: discovery of
// the core group, the pod, and the port-forward session.
func (p *peer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api":
		writeJSON(w, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}})
	case "/apis":
		writeJSON(w, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}})
	case "/api/v1":
		writeJSON(w, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1",
			APIResources: []metav1.APIResource{
				{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"po"}},
				{Name: "pods/portforward", Namespaced: true, Kind: "PodPortForwardOptions", Verbs: metav1.Verbs{"create", "get"}},
			}})
	case "/api/v1/namespaces/default/pods/web":
		writeJSON(w, &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: "anchor"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "none"}}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning}})
	case "/api/v1/namespaces/default/pods/web/portforward":
		p.portForward(w, r)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// portForward upgrades to SPDY, tunnelled through a WebSocket or not as
// kubectl asks, and serves every data stream kubectl opens.
func (p *peer) portForward(w http.ResponseWriter, r *http.Request) {
	handler := func(st httpstream.Stream, replySent <-chan struct{}) error {
		go p.serveStream(st, replySent)
		return nil
	}
	var conn httpstream.Connection
	if wstunnel.IsRequest(r) {
		c, err := wstunnel.Upgrade(w, r, []string{"portforward.k8s.io"})
		if err != nil {
			return
		}
		if conn, err = spdy.NewServerConnection(c, handler); err != nil {
			c.Close()
			return
		}
	} else {
		if proto, err := httpstream.Handshake(r, w, []string{"portforward.k8s.io"}); err != nil || proto == "" {
			return
		}
		if conn = spdy.NewResponseUpgrader().UpgradeResponse(w, r, handler); conn == nil {
			return
		}
	}
	<-conn.CloseChan()
}

// serveStream answers a data stream's HTTP request with the file, written
// in 256 KiB pieces as the agent writes what it reads from the pod. An
// error stream is closed at once: nothing goes wrong here.
func (p *peer) serveStream(st httpstream.Stream, replySent <-chan struct{}) {
	<-replySent
	defer st.Close()
	if st.Headers().Get(corev1.StreamType) != corev1.StreamTypeData {
		return
	}
	req, err := http.ReadRequest(bufio.NewReader(st))
	if err != nil {
		st.Reset()
		return
	}
	req.Body.Close()
	size := int64(*sizeMiB) << 20
	if _, err := fmt.Fprintf(st, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", size); err != nil {
		return
	}
	const piece = 256 << 10
	for range *sizeMiB {
		for off := 0; off < len(p.payload); off += piece {
			if _, err := st.Write(p.payload[off : off+piece]); err != nil {
				return
			}
		}
	}
}
