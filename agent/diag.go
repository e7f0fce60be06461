//go:build linux

package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"time"

	"portal.dev/portal/agent/dialcheck"
)

// Timeouts of the diagnostics portal explain asks for: short, because
// explain asks every node at once and answers within a second.
const (
	diagDialTimeout  = 500 * time.Millisecond
	diagProxyTimeout = 500 * time.Millisecond
)

// addDiagRoutes adds the diagnostics portal explain reaches through the
// API server's nodes/NAME/proxy:
//
//	GET /dial?address=IP:PORT&protocol=TCP    does anything listen there (dialcheck.Result)
//	GET /proxystatus/services/{ns}/{name}     this node's proxy's account of the Service (proxy/status)
//
// /dial dials only the addresses of pods this agent runs (their sandboxes
// up, not hostNetwork): it answers about this node's pods, and must not
// make the node a relay to anywhere else. The rest of the pod CIDR is
// refused with the rest of the world: its first address is the node's
// own bridge, where every socket the node binds to 0.0.0.0 (etcd, the API
// server, the agent itself) would answer. A hostNetwork pod's address is
// the node's for the same reason, so it is refused too; portal explain
// does not ask about hostNetwork endpoints.
func (a *Agent) addDiagRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /dial", a.serveDial)
	mux.HandleFunc("GET /proxystatus/services/{namespace}/{name}", a.serveProxyStatus)
}

func (a *Agent) serveDial(w http.ResponseWriter, r *http.Request) {
	ap, err := netip.ParseAddrPort(r.URL.Query().Get("address"))
	if err != nil {
		http.Error(w, fmt.Sprintf("address: want IP:PORT: %v", err), http.StatusBadRequest)
		return
	}
	if !a.runsPodAt(ap.Addr().Unmap()) {
		http.Error(w, fmt.Sprintf("%s is not the address of a running pod of node %s", ap.Addr(), a.opts.NodeName), http.StatusForbidden)
		return
	}
	res := dialcheck.Check(r.Context(), &net.Dialer{}, ap, r.URL.Query().Get("protocol"), diagDialTimeout)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(res)
}

// runsPodAt says whether addr is the own address of a pod whose sandbox
// this agent has up.
func (a *Agent) runsPodAt(addr netip.Addr) bool {
	a.mu.Lock()
	workers := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		workers = append(workers, w)
	}
	a.mu.Unlock()
	for _, w := range workers {
		w.mu.Lock()
		pt := w.targets
		w.mu.Unlock()
		if pt != nil && pt.up && slices.Contains(pt.ips, addr) {
			return true
		}
	}
	return false
}

// serveProxyStatus forwards to the status endpoint of this node's proxy
// (Options.ProxyStatusAddress, its --metrics-bind-address), which serves
// only the node itself. A proxy that does not answer is a 502 that says so.
func (a *Agent) serveProxyStatus(w http.ResponseWriter, r *http.Request) {
	if a.opts.ProxyStatusAddress == "" {
		http.Error(w, "the agent of node "+a.opts.NodeName+" has no --proxy-status-address", http.StatusNotFound)
		return
	}
	u := url.URL{Scheme: "http", Host: a.opts.ProxyStatusAddress,
		Path: "/status/services/" + url.PathEscape(r.PathValue("namespace")) + "/" + url.PathEscape(r.PathValue("name"))}
	client := http.Client{Timeout: diagProxyTimeout}
	resp, err := client.Get(u.String())
	if err != nil {
		http.Error(w, fmt.Sprintf("the service proxy of node %s does not answer at %s: %v", a.opts.NodeName, a.opts.ProxyStatusAddress, err), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, io.LimitReader(resp.Body, 1<<20))
}
