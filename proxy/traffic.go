package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"portal.dev/portal/proxy/status"
)

// trafficCounter is a proxy mode that counts each Service port's
// connections (proxy/nftables). Modes without it report no traffic.
type trafficCounter interface {
	Traffic(ctx context.Context) (status.Traffic, error)
}

// trafficCacheFor is how long one reading of the counters answers
// requests: every open service map polls every few seconds through every
// node, and one listing of the rules serves them all.
const trafficCacheFor = 2 * time.Second

// trafficCache keeps the last reading of the counters; its zero value is
// ready.
type trafficCache struct {
	mu   sync.Mutex
	at   time.Time
	last status.Traffic
}

// read returns a reading no older than trafficCacheFor, asking tc when
// the last one is older.
func (c *trafficCache) read(ctx context.Context, tc trafficCounter, now time.Time) (status.Traffic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && now.Sub(c.at) < trafficCacheFor {
		return c.last, nil
	}
	t, err := tc.Traffic(ctx)
	if err != nil {
		return status.Traffic{}, err
	}
	c.last, c.at = t, now
	return t, nil
}

// serveTraffic answers GET /status/traffic: this proxy's counters per
// Service port (proxy/status.Traffic). A mode that does not count answers
// 404, so that readers show nothing rather than zeros.
func (p *Proxy) serveTraffic(w http.ResponseWriter, r *http.Request) {
	tc, ok := p.proxier.(trafficCounter)
	if !ok {
		http.Error(w, "the "+p.opts.Mode+" mode of node "+p.hostname+"'s proxy counts no traffic", http.StatusNotFound)
		return
	}
	t, err := p.traffic.read(r.Context(), tc, time.Now())
	if err != nil {
		http.Error(w, "read the counters: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	t.Node, t.Mode = p.hostname, p.opts.Mode
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(t)
}
