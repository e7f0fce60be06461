package metricsapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"portal.dev/portal/internal/resourcemetrics"
)

// DefaultInterval is how often every node is scraped: within the 15 s
// kubectl top's figures may lag, and the window a CPU rate is taken over.
const DefaultInterval = 10 * time.Second

// Fetch reads one node's resource metrics.
type Fetch func(ctx context.Context, node *corev1.Node) (resourcemetrics.Sample, error)

// Scraper reads every node's resource metrics into Store each Interval.
type Scraper struct {
	Nodes    corelisters.NodeLister
	Fetch    Fetch
	Store    *Store
	Interval time.Duration
}

// Run scrapes until ctx ends, the first time at once.
func (s *Scraper) Run(ctx context.Context) {
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.scrapeAll(ctx, interval)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scrapeAll scrapes the nodes in parallel, each within timeout, and
// forgets the nodes that are gone or did not answer.
func (s *Scraper) scrapeAll(ctx context.Context, timeout time.Duration) {
	nodes, err := s.Nodes.List(labels.Everything())
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	keep := map[string]bool{}
	var wg sync.WaitGroup
	for _, n := range nodes {
		keep[n.Name] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			sample, err := s.Fetch(ctx, n)
			if err != nil {
				klog.FromContext(ctx).V(2).Info("Scrape node resource metrics", "node", n.Name, "err", err)
				s.Store.Forget(n.Name)
				return
			}
			s.Store.Add(n.Name, sample)
		}()
	}
	wg.Wait()
	s.Store.Retain(keep)
}

// HTTPFetch is the Fetch that reads https://ADDRESS/metrics/resource
// from a node's agent through transport (which carries the API server's
// client certificate); address says where a node's agent listens.
func HTTPFetch(transport http.RoundTripper, address func(*corev1.Node) (string, error)) Fetch {
	client := &http.Client{Transport: transport}
	return func(ctx context.Context, node *corev1.Node) (resourcemetrics.Sample, error) {
		host, err := address(node)
		if err != nil {
			return resourcemetrics.Sample{}, err
		}
		u := url.URL{Scheme: "https", Host: host, Path: "/metrics/resource"}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return resourcemetrics.Sample{}, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return resourcemetrics.Sample{}, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resourcemetrics.Sample{}, fmt.Errorf("GET %s: %s", u.String(), resp.Status)
		}
		return resourcemetrics.Parse(resp.Body, time.Now())
	}
}
