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
// /dial dials only addresses in this node's pod CIDRs: it answers about
// this node's pods, and must not make the node a relay to anywhere else.
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
	inPods := false
	for _, c := range a.podCIDRs {
		inPods = inPods || c.Contains(ap.Addr().Unmap())
	}
	if !inPods {
		http.Error(w, fmt.Sprintf("%s is not a pod address of node %s (pod CIDRs %v)", ap.Addr(), a.opts.NodeName, a.podCIDRs), http.StatusForbidden)
		return
	}
	res := dialcheck.Check(r.Context(), &net.Dialer{}, ap, r.URL.Query().Get("protocol"), diagDialTimeout)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(res)
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
