package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// summed over the nodes whose proxy counts, by "namespace/name". The page
// turns two replies into rates. A Service no node counted is absent, and
// shown without a rate.
type TrafficReply struct {
	Services map[string]status.Counts `json:"services"`
	// Nodes is how many nodes were asked; Counted how many answered with
	// counters (the others run no proxy, or a mode that does not count).
	Nodes   int `json:"nodes"`
	Counted int `json:"counted"`
	// Problems name the nodes that did not answer, and why.
	Problems []string `json:"problems,omitempty"`
}

// Asking every node at once would open a connection per node through the
// API server; trafficParallel bounds that, trafficTimeout bounds a node
// that does not answer.
const (
	trafficParallel = 32
	trafficTimeout  = 4 * time.Second
)

// trafficAsker asks one node's agent for its proxy's counters, as who.
type trafficAsker func(ctx context.Context, who user.Info, node string) (status.Traffic, error)

// errNotCounted is a node whose proxy counts nothing (a mode without
// counters, or no proxy): not a problem, just no numbers.
var errNotCounted = errors.New("not counted")

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
	reply := gatherTraffic(r.Context(), nodes, func(ctx context.Context, node string) (status.Traffic, error) {
		return ask(ctx, who, node)
	})
	mayList := map[string]bool{}
	for key := range reply.Services {
		kns, _, _ := strings.Cut(key, "/")
		ok, seen := mayList[kns]
		if !seen {
			ok = (ns == "" || kns == ns) && u.mayList(r.Context(), who, kindServices, kns)
			mayList[kns] = ok
		}
		if !ok {
			delete(reply.Services, key)
		}
	}
	writeJSON(w, http.StatusOK, reply)
}

// gatherTraffic asks every node, a few at a time, and sums what they
// counted.
func gatherTraffic(ctx context.Context, nodes []string, ask func(ctx context.Context, node string) (status.Traffic, error)) TrafficReply {
	results := make([]status.Traffic, len(nodes))
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
	reply := TrafficReply{Nodes: len(nodes)}
	var counted []status.Traffic
	for i, err := range errs {
		switch {
		case err == nil:
			counted = append(counted, results[i])
		case errors.Is(err, errNotCounted):
		default:
			reply.Problems = append(reply.Problems, fmt.Sprintf("node %s: %v", nodes[i], err))
		}
	}
	reply.Counted = len(counted)
	reply.Services = status.Sum(counted)
	return reply
}

// askNodeProxy asks node's agent for /proxystatus/traffic through the API
// server's nodes/NAME/proxy, impersonating who.
func (u *UI) askNodeProxy(ctx context.Context, who user.Info, node string) (status.Traffic, error) {
	client, err := kubernetes.NewForConfig(impersonating(u.cfg.Loopback, who))
	if err != nil {
		return status.Traffic{}, err
	}
	raw, err := client.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource("proxy").Suffix("proxystatus/traffic").Do(ctx).Raw()
	switch {
	case apierrors.IsNotFound(err):
		return status.Traffic{}, errNotCounted
	case apierrors.IsForbidden(err):
		return status.Traffic{}, fmt.Errorf("no permission to get nodes/proxy")
	case err != nil:
		return status.Traffic{}, err
	}
	var t status.Traffic
	if err := json.Unmarshal(raw, &t); err != nil {
		return status.Traffic{}, fmt.Errorf("its counters: %w", err)
	}
	return t, nil
}
