package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/proxy/status"
)

// TrafficReply is the answer of /ui/api/traffic: each Service's counters
// summed over the nodes, by "namespace/name". The page turns two replies
// into rates. A Service nothing counted is absent, and shown without a
// rate.
type TrafficReply struct {
	// Services are the node proxies' counters.
	Services map[string]status.Counts `json:"services"`
	// Ingress are the Ingress controllers' counters, by backend Service.
	Ingress map[string]IngressCounts `json:"ingress"`
	// Nodes is how many nodes were asked; Counted how many proxies
	// answered with counters (the others run no proxy, or a mode that
	// does not count), IngressCounted how many Ingress controllers.
	Nodes          int `json:"nodes"`
	Counted        int `json:"counted"`
	IngressCounted int `json:"ingressCounted"`
	// Problems name the nodes that did not answer, and why.
	Problems []string `json:"problems,omitempty"`
}

// IngressCounts is an Ingress controller's count for one backend Service
// (the JSON of ingress.BackendCounts): requests, and 5xx responses.
type IngressCounts struct {
	Requests uint64 `json:"requests"`
	Errors   uint64 `json:"errors"`
}

// nodeTraffic is what one node's agent relayed: its proxy's counters and
// its Ingress controller's, each nil when the node has none that counts.
type nodeTraffic struct {
	proxy   *status.Traffic
	ingress map[string]IngressCounts
}

// Asking every node at once would open a connection per node through the
// API server; trafficParallel bounds that, trafficTimeout bounds a node
// that does not answer.
const (
	trafficParallel = 32
	trafficTimeout  = 4 * time.Second
)

// trafficAsker asks one node's agent for its counters, as who.
type trafficAsker func(ctx context.Context, who user.Info, node string) (nodeTraffic, error)

// serveTraffic answers GET /ui/api/traffic[?namespace=NS]. Each node is
// asked through the API server's nodes/NAME/proxy as the caller, so the
// API decides whether they may; the answer keeps only the Services of
// namespaces whose Services the caller may list.
func (u *UI) serveTraffic(w http.ResponseWriter, r *http.Request, who user.Info) {
	ns := r.URL.Query().Get("namespace")
	if !u.mayList(r.Context(), who, kindNodes, "") {
		writeError(w, http.StatusForbidden, fmt.Sprintf("nodes is forbidden: User %q cannot list nodes, whose proxies count the traffic", who.GetName()))
		return
	}
	if err := u.caches.wait(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	var nodes []string
	for _, n := range all[*corev1.Node](u.caches.nodes) {
		nodes = append(nodes, n.Name)
	}
	sort.Strings(nodes)
	ask := u.askTraffic
	if ask == nil {
		ask = u.askNodeProxy
	}
	reply := gatherTraffic(r.Context(), nodes, func(ctx context.Context, node string) (nodeTraffic, error) {
		return ask(ctx, who, node)
	})
	mayList := map[string]bool{}
	visible := func(key string) bool {
		kns, _, _ := strings.Cut(key, "/")
		ok, seen := mayList[kns]
		if !seen {
			ok = (ns == "" || kns == ns) && u.mayList(r.Context(), who, kindServices, kns)
			mayList[kns] = ok
		}
		return ok
	}
	maps.DeleteFunc(reply.Services, func(key string, _ status.Counts) bool { return !visible(key) })
	maps.DeleteFunc(reply.Ingress, func(key string, _ IngressCounts) bool { return !visible(key) })
	writeJSON(w, http.StatusOK, reply)
}

// gatherTraffic asks every node, a few at a time, and sums what they
// counted.
func gatherTraffic(ctx context.Context, nodes []string, ask func(ctx context.Context, node string) (nodeTraffic, error)) TrafficReply {
	results := make([]nodeTraffic, len(nodes))
	errs := make([]error, len(nodes))
	sem := make(chan struct{}, trafficParallel)
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(ctx, trafficTimeout)
			defer cancel()
			results[i], errs[i] = ask(ctx, node)
		}()
	}
	wg.Wait()
	reply := TrafficReply{Nodes: len(nodes), Ingress: map[string]IngressCounts{}}
	var counted []status.Traffic
	for i, err := range errs {
		if err != nil {
			reply.Problems = append(reply.Problems, fmt.Sprintf("node %s: %v", nodes[i], err))
		}
		if p := results[i].proxy; p != nil {
			counted = append(counted, *p)
		}
		if in := results[i].ingress; in != nil {
			reply.IngressCounted++
			for key, c := range in {
				sum := reply.Ingress[key]
				reply.Ingress[key] = IngressCounts{Requests: sum.Requests + c.Requests, Errors: sum.Errors + c.Errors}
			}
		}
	}
	reply.Counted = len(counted)
	reply.Services = status.Sum(counted)
	return reply
}

// askNodeProxy asks node's agent, through the API server's
// nodes/NAME/proxy and impersonating who, for its proxy's counters
// (/proxystatus/traffic) and its Ingress controller's
// (/ingressstatus/backends). A 404 is a node without one that counts: no
// numbers, and no problem either. The counters it did get come back
// with the error of those it did not.
func (u *UI) askNodeProxy(ctx context.Context, who user.Info, node string) (nodeTraffic, error) {
	client, err := kubernetes.NewForConfig(impersonating(u.cfg.Loopback, who))
	if err != nil {
		return nodeTraffic{}, err
	}
	get := func(path string, into any) (bool, error) {
		raw, err := client.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource("proxy").Suffix(path).Do(ctx).Raw()
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case apierrors.IsForbidden(err):
			return false, errNoPermission
		case err != nil:
			return false, err
		}
		if err := json.Unmarshal(raw, into); err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
		return true, nil
	}
	var out nodeTraffic
	var t status.Traffic
	ok, errProxy := get("proxystatus/traffic", &t)
	if ok {
		out.proxy = &t
	}
	if errors.Is(errProxy, errNoPermission) {
		return out, errProxy // the second question would be refused too
	}
	var in struct {
		Services map[string]IngressCounts `json:"services"`
	}
	ok, errIngress := get("ingressstatus/backends", &in)
	if ok {
		out.ingress = in.Services
		if out.ingress == nil {
			out.ingress = map[string]IngressCounts{}
		}
	}
	switch {
	case errProxy != nil && errIngress != nil:
		return out, fmt.Errorf("proxy: %w; Ingress controller: %w", errProxy, errIngress)
	case errIngress != nil:
		return out, fmt.Errorf("Ingress controller: %w", errIngress)
	}
	return out, errProxy
}

// errNoPermission is a caller who may not get nodes/proxy.
var errNoPermission = errors.New("no permission to get nodes/proxy")
