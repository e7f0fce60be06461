package userspace

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// userspaceSeries returns the portal_userspace_* series a scrape of reg
// shows, as name{label="value",...}.
func userspaceSeries(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "portal_userspace_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out = append(out, mf.GetName()+"{"+strings.Join(labels, ",")+"}")
		}
	}
	return out
}

// seriesWith returns the series that carry label="value".
func seriesWith(series []string, label, value string) []string {
	var out []string
	for _, s := range series {
		if strings.Contains(s, fmt.Sprintf("%s=%q", label, value)) {
			out = append(out, s)
		}
	}
	return out
}

// waitForSeries waits until the scrape's series with label="value" are
// the ones ok accepts: a connection's last count lands just after its
// client has seen the end.
func waitForSeries(t *testing.T, reg *prometheus.Registry, label, value, want string, ok func([]string) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := seriesWith(userspaceSeries(t, reg), label, value)
		if ok(got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("series with %s=%q: got %q, want %s", label, value, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdServer accepts connections and hands them to the test.
func holdServer(t *testing.T) (netip.AddrPort, <-chan net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			accepted <- c
		}
	}()
	return l.Addr().(*net.TCPAddr).AddrPort(), accepted
}

// TestMetricsOfGoneEndpoint pins a bug: an endpoint's series stayed in
// /metrics for the life of the proxy after the endpoint had gone. They
// must stay while it drains and go when its last connection ends, while
// the series of the endpoints that remain stay.
func TestMetricsOfGoneEndpoint(t *testing.T) {
	reg := prometheus.NewRegistry()
	held, accepted := holdServer(t)
	stays := byeServer(t)
	np := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", np)
	p := startProxier(t, Config{Registerer: reg, DrainTimeout: time.Minute}, nodePortSnapshot(np, held))

	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	up := <-accepted
	// One round trip: the proxy has then counted the connection.
	io.WriteString(up, "x")
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(context.Background(), snapshot.Request{Snapshot: nodePortSnapshot(np, stays), Full: true}); err != nil {
		t.Fatal(err)
	}
	if got := askBye(t, addr, "hello"); got != "bye:5" {
		t.Fatalf("through the endpoint that stays: got %q, want bye:5", got)
	}

	draining := `portal_userspace_active_connections{endpoint="` + held.String() + `",port="http",service="default/web"}`
	if got := seriesWith(userspaceSeries(t, reg), "endpoint", held.String()); !slices.Contains(got, draining) {
		t.Fatalf("while the gone endpoint drains: got %q, want %s among them", got, draining)
	}
	c.Close()
	up.Close()
	waitForSeries(t, reg, "endpoint", held.String(), "none once its connection ended", func(got []string) bool { return len(got) == 0 })
	if got := seriesWith(userspaceSeries(t, reg), "endpoint", stays.String()); len(got) == 0 {
		t.Errorf("series of the endpoint that stays: got none, want its counters")
	}
}

// fakeVIPs stands in for the VIP link: the tests' Service addresses are
// loopback ones, local without it.
type fakeVIPs struct{}

func (fakeVIPs) Sync(context.Context, []netip.Addr) error { return nil }
func (fakeVIPs) Delete(context.Context) error             { return nil }

// TestMetricsOfGoneServicePort pins a bug: a removed Service port's
// series (its endpoints' and its loadBalancerSourceRanges refusals)
// stayed in /metrics for the life of the proxy.
func TestMetricsOfGoneServicePort(t *testing.T) {
	nn := types.NamespacedName{Namespace: "default", Name: "lb"}
	ep := byeServer(t)
	port := freePort(t)
	cip, lbVIP := netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")
	snap := &snapshot.Snapshot{
		Services: map[types.NamespacedName]*snapshot.Service{nn: {
			Name: nn, ClusterIPs: []netip.Addr{cip}, LoadBalancerVIPs: []netip.Addr{lbVIP},
			SourceRanges: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, // not 127.0.0.1
			Ports:        []snapshot.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: port}},
		}},
		Endpoints: map[types.NamespacedName]*snapshot.ServiceEndpoints{nn: {ByPort: map[snapshot.PortKey][]*snapshot.Endpoint{
			{Name: "http", Protocol: v1.ProtocolTCP}: {{Addr: ep.Addr(), Port: ep.Port(), Ready: true, Serving: true, Local: true, NodeName: "n"}}}}},
		Node: &snapshot.Node{Name: "n", Eligible: true},
	}
	reg := prometheus.NewRegistry()
	p := startProxier(t, Config{Registerer: reg, VIPs: fakeVIPs{}}, snap)

	if got := askBye(t, netip.AddrPortFrom(cip, port).String(), "hello"); got != "bye:5" {
		t.Fatalf("through the cluster IP: got %q, want bye:5", got)
	}
	// The refusal is a reset, which may come before the dial returns.
	if c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(lbVIP, port).String(), 2*time.Second); err == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("through the load balancer VIP from outside its source ranges: read %d bytes, want refused", n)
		}
		c.Close()
	}
	waitForSeries(t, reg, "service", nn.String(), "a refusal and the endpoint's counters", func(got []string) bool {
		return slices.Contains(got, `portal_userspace_denied_total{port="http",service="default/lb"}`) &&
			slices.Contains(got, `portal_userspace_active_connections{endpoint="`+ep.String()+`",port="http",service="default/lb"}`)
	})

	gone := &snapshot.Snapshot{Node: snap.Node}
	if err := p.Sync(context.Background(), snapshot.Request{Snapshot: gone, Full: true}); err != nil {
		t.Fatal(err)
	}
	waitForSeries(t, reg, "service", nn.String(), "none once the Service is gone", func(got []string) bool { return len(got) == 0 })
}

// openConn stands for a connection whose proxying has not ended yet.
type openConn struct{ id int }

func (*openConn) Close() error { return nil }
func (*openConn) drains() bool { return true }

// TestMetricsSharedByTwoBackends: an endpoint that leaves and comes back
// while its old connections drain is two backends with one label set; the
// series stay until the last of them is gone.
func TestMetricsSharedByTwoBackends(t *testing.T) {
	reg := prometheus.NewRegistry()
	nn := types.NamespacedName{Namespace: "default", Name: "web"}
	sp := &servicePort{key: portKey{svc: nn, port: "http", prot: v1.ProtocolTCP}, metrics: newMetrics(reg),
		all: map[netip.AddrPort]*backend{}, affinity: map[netip.Addr]affinityEntry{}}
	eps := endpointsAt(1)
	ep := eps[0].AddrPort().String()
	conns := `portal_userspace_connections_total{endpoint="` + ep + `",port="http",service="default/web"}`

	old := sp.backends(eps)[0]
	c := &openConn{}
	old.track(c)
	old.stats().conns.Inc()
	sp.retain(nil, 0) // left; c has not ended yet
	back := sp.backends(eps)[0]
	if back == old {
		t.Fatal("the endpoint that came back is the drained backend, want a new one")
	}
	back.stats().conns.Inc()
	old.untrack(c) // the old backend has drained
	if got := seriesWith(userspaceSeries(t, reg), "endpoint", ep); !slices.Contains(got, conns) {
		t.Fatalf("after the old backend drained: got %q, want %s among them", got, conns)
	}
	sp.retain(nil, 0)
	if got := seriesWith(userspaceSeries(t, reg), "endpoint", ep); len(got) != 0 {
		t.Fatalf("after both backends went: got %q, want none", got)
	}
}
