package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"portal.dev/portal/proxy/status"
)

// countingProxier is a mode that counts traffic; reads counts the
// listings it was asked for.
type countingProxier struct {
	fakeProxier
	reads int
}

func (c *countingProxier) Traffic(context.Context) (status.Traffic, error) {
	c.reads++
	var t status.Traffic
	t.AddPort("ns/web", "tcp/80", status.Counts{Connections: uint64(10 * c.reads), Refused: 1})
	return t, nil
}

func TestServeTraffic(t *testing.T) {
	local := func() ([]netip.Addr, error) { return nil, nil }
	get := func(t *testing.T, p *Proxy) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		p.serveTraffic(rec, httptest.NewRequest(http.MethodGet, "/status/traffic", nil))
		return rec
	}

	t.Run("a counting mode answers with node, mode and counts", func(t *testing.T) {
		cp := &countingProxier{}
		p, err := newProxy(fake.NewClientset(), Options{HostnameOverride: "node1", Mode: ModeNFTables}, cp, nil, local)
		if err != nil {
			t.Fatal(err)
		}
		rec := get(t, p)
		var got status.Traffic
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("got %d %q, want 200 with JSON", rec.Code, rec.Body)
		}
		want := status.Counts{Connections: 10, Refused: 1}
		if got.Node != "node1" || got.Mode != ModeNFTables || got.Services["ns/web"]["tcp/80"] != want {
			t.Errorf("got %+v, want node1, %s, ns/web tcp/80 %+v", got, ModeNFTables, want)
		}
	})

	t.Run("a mode that does not count answers 404", func(t *testing.T) {
		p, err := newProxy(fake.NewClientset(), Options{HostnameOverride: "node1"}, &fakeProxier{}, nil, local)
		if err != nil {
			t.Fatal(err)
		}
		if rec := get(t, p); rec.Code != http.StatusNotFound {
			t.Errorf("got %d, want 404", rec.Code)
		}
	})
}

func TestTrafficCache(t *testing.T) {
	cp := &countingProxier{}
	var c trafficCache
	start := time.Unix(1000, 0)
	for _, step := range []struct {
		at        time.Duration
		wantReads int
	}{
		{0, 1},
		{time.Second, 1},                   // answered from the last reading
		{trafficCacheFor, 2},               // old enough: read again
		{trafficCacheFor + time.Second, 2}, // and that reading is reused
	} {
		if _, err := c.read(context.Background(), cp, start.Add(step.at)); err != nil {
			t.Fatal(err)
		}
		if cp.reads != step.wantReads {
			t.Errorf("at +%v: got %d listings, want %d", step.at, cp.reads, step.wantReads)
		}
	}
}
