//go:build linux

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"portal.dev/portal/agent/dialcheck"
	"portal.dev/portal/agent/httpprobe"
)

// Timeouts of the diagnostics portal explain asks for: short, because
// explain asks every node at once and answers within a second.
const (
	diagDialTimeout  = 500 * time.Millisecond
	diagProxyTimeout = 500 * time.Millisecond
	diagDNSTimeout   = 300 * time.Millisecond
	diagHTTPTimeout  = 500 * time.Millisecond
	// trafficProxyTimeout is longer: the proxy dumps its rules to read
	// the counters (a tenth of a second with 10,000 Services on a busy
	// node), and the map polls every few seconds rather than answering
	// at once.
	trafficProxyTimeout = 3 * time.Second
)

// noIngressText starts the agent's answer when its node has no Ingress
// controller listening on the scheme asked (explain/nodes.go reads it).
const noIngressText = "no Ingress controller known on node "

// DNSAnswer is what /dnsquery returns: the cluster DNS's reply in wire
// format and the server that gave it.
type DNSAnswer struct {
	Server  string `json:"server"`
	Message []byte `json:"message"`
}

// addDiagRoutes adds the diagnostics portal explain reaches through the
// API server's nodes/NAME/proxy:
//
//	GET /dial?address=IP:PORT&protocol=TCP    does anything listen there (dialcheck.Result)
//	GET /proxystatus/services/{ns}/{name}     this node's proxy's account of the Service (proxy/status)
//	GET /proxystatus/traffic                  this node's proxy's counters per Service port (status.Traffic)
//	GET /ingressstatus/backends               this node's Ingress controller's requests per backend Service (ingress.BackendTraffic)
//	GET /dnsquery?name=NAME&type=N            the cluster DNS's answer, asked from the node (DNSAnswer)
//	GET /httpprobe?scheme=S&host=H&path=P     one GET through this node's Ingress controller (httpprobe.Result)
//
// /dnsquery lets a caller outside the cluster network (a workstation) see
// what pods are told: it asks only the cluster DNS (--cluster-dns, the
// pods' nameservers), so the node relays nothing else.
//
// /dial dials only the addresses of pods this agent runs (their sandboxes
// up, not hostNetwork): it answers about this node's pods, and must not
// make the node a relay to anywhere else. The rest of the pod CIDR is
// refused with the rest of the world: its first address is the node's
// own bridge, where every socket the node binds to 0.0.0.0 (etcd, the API
// server, the agent itself) would answer. A hostNetwork pod's address is
// the node's for the same reason, so it is refused too; portal explain
// does not ask about hostNetwork endpoints.
//
// /httpprobe sends only to this node's own Ingress listeners
// (Options.IngressHTTPAddress, IngressHTTPSAddress): the caller picks the
// Host header, path and scheme, never the address, method, headers or
// body, and gets back a bounded, escaped answer (see agent/httpprobe).
func (a *Agent) addDiagRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /dial", a.serveDial)
	mux.HandleFunc("GET /proxystatus/services/{namespace}/{name}", a.serveProxyStatus)
	mux.HandleFunc("GET /proxystatus/traffic", a.serveProxyTraffic)
	mux.HandleFunc("GET /ingressstatus/backends", a.serveIngressBackends)
	mux.HandleFunc("GET /dnsquery", a.serveDNSQuery)
	mux.HandleFunc("GET /httpprobe", a.serveHTTPProbe)
}

// serveHTTPProbe sends one request through this node's Ingress
// controller; a node without one on the scheme asked is a 404 saying so.
func (a *Agent) serveHTTPProbe(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := httpprobe.Request{Scheme: q.Get("scheme"), Host: q.Get("host"), Path: q.Get("path")}
	if req.Scheme == "" {
		req.Scheme = httpprobe.HTTP
	}
	if req.Path == "" {
		req.Path = "/"
	}
	if err := req.Validate(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	addr := a.opts.IngressHTTPAddress
	if req.Scheme == httpprobe.HTTPS {
		addr = a.opts.IngressHTTPSAddress
	}
	if addr == "" {
		http.Error(w, fmt.Sprintf("%s%s for %s (the agent has no --ingress-%s-address)", noIngressText, a.opts.NodeName, req.Scheme, req.Scheme), http.StatusNotFound)
		return
	}
	res := httpprobe.Probe(r.Context(), &net.Dialer{}, addr, req, diagHTTPTimeout)
	writeJSON(w, res)
}

// serveDNSQuery asks each cluster DNS server in turn one question and
// returns the first answer; none answering is a 502 that says why.
func (a *Agent) serveDNSQuery(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	qtype, err := strconv.ParseUint(r.URL.Query().Get("type"), 10, 16)
	if name == "" || err != nil {
		http.Error(w, "want name=NAME&type=N (a DNS type number)", http.StatusBadRequest)
		return
	}
	if len(a.opts.ClusterDNS) == 0 {
		http.Error(w, "the agent of node "+a.opts.NodeName+" has no --cluster-dns", http.StatusNotFound)
		return
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), uint16(qtype))
	client := &dns.Client{Timeout: diagDNSTimeout}
	var errs []string
	for _, ip := range a.opts.ClusterDNS {
		server := netip.AddrPortFrom(ip, 53).String()
		reply, _, err := client.ExchangeContext(r.Context(), m, server)
		if err != nil {
			errs = append(errs, server+": "+err.Error())
			continue
		}
		wire, err := reply.Pack()
		if err != nil {
			errs = append(errs, server+": "+err.Error())
			continue
		}
		writeJSON(w, DNSAnswer{Server: server, Message: wire})
		return
	}
	http.Error(w, fmt.Sprintf("the cluster DNS does not answer from node %s: %s", a.opts.NodeName, strings.Join(errs, "; ")), http.StatusBadGateway)
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
	writeJSON(w, res)
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
	a.forwardToProxy(w, r, "/status/services/"+url.PathEscape(r.PathValue("namespace"))+"/"+url.PathEscape(r.PathValue("name")), diagProxyTimeout)
}

// serveProxyTraffic forwards to the proxy's counters (/status/traffic),
// which the service map turns into request and error rates; a proxy mode
// that counts nothing answers 404 through it.
func (a *Agent) serveProxyTraffic(w http.ResponseWriter, r *http.Request) {
	a.forwardToProxy(w, r, "/status/traffic", trafficProxyTimeout)
}

// serveIngressBackends forwards to the counters of this node's Ingress
// controller (/status/backends on Options.IngressStatusAddress); a node
// without one configured answers 404.
func (a *Agent) serveIngressBackends(w http.ResponseWriter, r *http.Request) {
	forward(w, r, "Ingress controller", "--ingress-status-address", a.opts.NodeName, a.opts.IngressStatusAddress, "/status/backends", diagProxyTimeout)
}

// forwardToProxy answers with the proxy's answer to GET path, waiting
// at most timeout.
func (a *Agent) forwardToProxy(w http.ResponseWriter, r *http.Request, path string, timeout time.Duration) {
	forward(w, r, "service proxy", "--proxy-status-address", a.opts.NodeName, a.opts.ProxyStatusAddress, path, timeout)
}

// diagClient is the one client the forwarders share. It never takes a
// proxy from the environment (HTTP_PROXY): the components it asks listen
// on this node, which a proxy elsewhere would not reach, or would answer
// for its own host. It keeps a few connections open, since the service
// map asks the same two or three addresses every few seconds.
var diagClient = &http.Client{
	Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        4,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	},
}

// forward answers r with the answer of the component what on node, at
// addr (set by flag), to GET path, waiting at most timeout.
func forward(w http.ResponseWriter, r *http.Request, what, flag, node, addr, path string, timeout time.Duration) {
	if addr == "" {
		http.Error(w, "the agent of node "+node+" has no "+flag, http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	u := url.URL{Scheme: "http", Host: addr, Path: path}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	var resp *http.Response
	if err == nil {
		resp, err = diagClient.Do(req)
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("the %s of node %s does not answer at %s: %v", what, node, addr, err), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, io.LimitReader(resp.Body, 1<<20))
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
