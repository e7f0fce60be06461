//go:build linux

package nftables

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/conntrack"
	"portal.dev/portal/proxy/internal/netnstest"
	"portal.dev/portal/proxy/leftovers"
	"portal.dev/portal/proxy/snapshot"
	"portal.dev/portal/proxy/status"
)

// TestKernel loads realistic rulesets into the real kernel and reads them
// back, so every rule form we generate is proven to parse and load (nft
// 1.0.6, kernel 6.x here); it also sends traffic through them. It runs in
// a network namespace of its own: the test binary re-executes itself
// under `unshare --net`, so the host's rules and conntrack table are
// never touched.
func TestKernel(t *testing.T) {
	if !netnstest.Enter(t, "nft", "ip") {
		return
	}
	ctx := context.Background()
	setupLinks(t)

	nft4, err := knftables.New(knftables.IPv4Family, tableName)
	if err != nil {
		t.Fatal(err)
	}
	nft6, err := knftables.New(knftables.IPv6Family, tableName)
	if err != nil {
		t.Fatal(err)
	}

	// Everything twice: full syncs through nft, then through netlink (what
	// portal proxy does), each followed by partial syncs through nft.
	for _, viaNetlink := range []bool{false, true} {
		name := "full syncs through nft"
		if viaNetlink {
			name = "full syncs through netlink"
		}
		t.Run(name, func(t *testing.T) {
			sh(t, "conntrack -F 2>/dev/null || true")
			kernelChecks(t, ctx, nft4, nft6, viaNetlink)
		})
	}
}

// kernelChecks is TestKernel's sequence; it starts and ends with no portal
// table.
func kernelChecks(t *testing.T, ctx context.Context, nft4, nft6 knftables.Interface, viaNetlink bool) {
	// The iptables mode's leftovers, to be removed before the first sync.
	sh(t, "iptables-nft -t nat -N PORTAL-SERVICES && iptables-nft -t nat -A PREROUTING -j PORTAL-SERVICES && iptables-nft -t filter -N PORTAL-FIREWALL && iptables-nft -A INPUT -j PORTAL-FIREWALL && ip6tables-nft -t nat -N PORTAL-SERVICES && ip6tables-nft -t nat -A OUTPUT -j PORTAL-SERVICES")
	cfg := Config{
		ClusterCIDRs:    []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/64")},
		BeforeFirstSync: func(ctx context.Context) error { return leftovers.DeleteIPTables(ctx, nil) },
	}
	newProxier := func() *Proxier {
		p := NewWithInterfaces(cfg, nft4, nft6)
		if viaNetlink {
			useNetlink(t, p)
		}
		return p
	}
	p := newProxier()
	w := kernelWorld()

	t.Run("full sync of every kind of Service loads", func(t *testing.T) {
		start := time.Now()
		mustSync(t, p, fullRequest(w.snap))
		t.Logf("full sync of %d Services: %v", len(w.snap.Services), time.Since(start))
		got := sh(t, "nft list table ip portal")
		for _, want := range []string{
			`meta l4proto tcp counter packets \d+ bytes \d+ dnat ip to numgen random mod 2 offset \d+ map @endpoints-tcp-0\n`,
			`\d+ : 10\.244\.1\.5 \. 8080[,\n ]`,
			`ip daddr \. meta l4proto \. th dport \. ip saddr @firewall-allow return`,
			`meta l4proto sctp counter packets \d+ bytes \d+ dnat ip to numgen random mod 1 (offset \d+ )?map @endpoints-sctp-0\n`,
			`\d+ : 10\.244\.3\.1 \. 9000[,\n ]`,
			`meta l4proto tcp counter packets \d+ bytes \d+ dnat ip to numgen random mod 40 offset \d+ map @endpoints-tcp-0\n`,
			`update @affinity-default/sticky/tcp/80/10\.244\.4\.1_8080-t600 \{ ip saddr \} dnat to 10\.244\.4\.1:8080`,
		} {
			if !regexp.MustCompile(want).MatchString(got) {
				t.Errorf("kernel ruleset lacks %q", want)
			}
		}
		got6 := sh(t, "nft list table ip6 portal")
		if !regexp.MustCompile(`\d+ : fd00::1 \. 8080[,\n ]`).MatchString(got6) {
			t.Errorf("IPv6 ruleset lacks the endpoint [fd00::1]:8080:\n%s", got6)
		}
		t.Logf("one ClusterIP Service with two endpoints, as the kernel lists it:\n%s", excerpt(got, "default/web2/", "10.96.0.20", "10.244.1.5"))
		if out := sh(t, "iptables-nft-save; ip6tables-nft-save"); strings.Contains(out, "PORTAL-") {
			t.Errorf("the iptables mode's chains survived:\n%s", out)
		}
	})

	t.Run("traffic goes through", func(t *testing.T) {
		checkTCP(t, "10.96.0.10:80", "hello")    // ClusterIP, local endpoint
		checkTCP(t, "10.0.0.1:30080", "hello")   // NodePort on a local address
		checkTCP(t, "[fd00:96::10]:80", "hello") // IPv6 ClusterIP
		checkRefused(t, "10.96.0.11:80")         // no endpoints: TCP reset at once
		checkUDP(t, "10.96.0.12:53", "udp:ping") // UDP ClusterIP
		checkRefused(t, "10.96.0.13:80")         // only unready endpoints
		checkUDPRefused(t, "10.96.0.11:53")      // no endpoints: ICMP port unreachable
		// Both endpoints get connections; ClientIP affinity pins one.
		if got := bodies(t, "10.96.0.21:80", 30); len(got) != 2 {
			t.Errorf("spread over two endpoints: got %v", got)
		}
		if got := bodies(t, "10.96.0.22:80", 20); len(got) != 1 {
			t.Errorf("affinity: one client reached %v", got)
		}
		// The counters saw each of those connections, and the refusals.
		traffic, err := p.Traffic(context.Background())
		if err != nil {
			t.Fatalf("read the counters: %v", err)
		}
		if got := traffic.Services["default/spread"]["tcp/80"]; got != (status.Counts{Connections: 30}) {
			t.Errorf("default/spread tcp/80 counted %+v, want 30 connections", got)
		}
		if got := traffic.Services["default/pinned"]["tcp/80"].Connections; got != 20 {
			t.Errorf("default/pinned (affinity) counted %d connections, want 20", got)
		}
		none := traffic.Services["default/none"]
		if none["tcp/80"] != (status.Counts{Refused: 1}) || none["udp/53"] != (status.Counts{Refused: 1}) {
			t.Errorf("default/none counted %+v, want one refusal on each port", none)
		}
		// loadBalancerSourceRanges: an allowed source gets through,
		// another is dropped.
		checkTCPFrom(t, "203.0.113.5", "192.0.2.10:80", "hello")
		if c, err := (&net.Dialer{Timeout: 300 * time.Millisecond}).Dial("tcp", "192.0.2.10:80"); err == nil {
			c.Close()
			t.Error("source outside loadBalancerSourceRanges got through")
		}
		// externalTrafficPolicy Local without a local endpoint: the node
		// itself short-circuits to the cluster endpoint (fib saddr type
		// local); traffic from elsewhere is dropped, which this namespace
		// alone cannot show, so the rule is checked instead.
		checkTCP(t, "10.0.0.1:30090", "hello")
		if got := sh(t, "nft list map ip portal no-endpoint-nodeports"); !strings.Contains(got, "tcp . 30090 : drop") {
			t.Errorf("no drop for the Local NodePort without local endpoints:\n%s", got)
		}
	})

	t.Run("UDP conntrack entries of a removed endpoint are deleted", func(t *testing.T) {
		conn, err := net.Dial("udp", "10.96.0.12:53")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		roundTrip(t, conn, "udp:again")
		ct := conntrack.Exec{}
		before := findFlow(t, ct, "10.96.0.12", "10.0.0.1")
		if before == 0 {
			t.Fatal("no conntrack entry for the UDP flow")
		}
		prev := w.snap
		nn := w.set(svc("default/udp", "10.96.0.12", port("dns", v1.ProtocolUDP, 53, 0)), endpointsFor("dns", v1.ProtocolUDP, ep("10.0.0.2:5353")))
		mustSync(t, p, partialRequest(w.snap, nn))
		c := &conntrack.Cleaner{CT: ct}
		if err := c.AfterSync(context.Background(), prev, w.snap, map[types.NamespacedName]struct{}{nn: {}}, false); err != nil {
			t.Fatal(err)
		}
		if after := findFlow(t, ct, "10.96.0.12", "10.0.0.1"); after != 0 {
			t.Errorf("%d entries to the removed endpoint survived", after)
		}
		// And the full-sync reconciler path lists and parses the real table.
		if _, err := ct.List(context.Background(), v1.IPv4Protocol, v1.ProtocolUDP); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("incremental syncs apply on top", func(t *testing.T) {
		var changed []types.NamespacedName
		// Endpoints change, a Service is deleted (its map element and its
		// chain go in one transaction), one is added, an affinity timeout
		// changes (sets are deleted and created), one loses all endpoints.
		changed = append(changed, w.set(svc("default/web", "10.96.0.10", port("http", v1.ProtocolTCP, 80, 30080)), endpointsFor("http", v1.ProtocolTCP, ep("10.0.0.1:8080", "node=node2"), ep("[fd00::1]:8080", "local"))))
		deleted := types.NamespacedName{Namespace: "default", Name: "web2"}
		w.remove(deleted)
		changed = append(changed, deleted)
		changed = append(changed, w.set(svc("default/new", "10.96.0.30,fd00:96::30", externalIPs("192.0.2.30")), endpointsFor("http", v1.ProtocolTCP, ep("10.244.5.1:80"), ep("[fd00:244::5]:80"))))
		changed = append(changed, w.set(svc("default/sticky", "10.96.0.16", affinity(20*time.Minute)), endpointsFor("http", v1.ProtocolTCP, ep("10.244.4.1:8080"))))
		changed = append(changed, w.set(svc("default/many", "10.96.0.15"), nil))
		// A map element changes its value (drop becomes reject): deleted
		// and added again in the same transaction.
		changed = append(changed, w.set(svc("default/local", "10.96.0.17", port("http", v1.ProtocolTCP, 80, 30090), externalLocal), nil))
		start := time.Now()
		mustSync(t, p, partialRequest(w.snap, changed...))
		t.Logf("partial sync of %d changes: %v", len(changed), time.Since(start))
		got := sh(t, "nft list table ip portal")
		for _, gone := range []string{"default/web2/", "affinity-default/sticky/tcp/80/10.244.4.1_8080-t600", "service-default/many/", "mod 40", "10.244.8.1 . 80"} {
			if strings.Contains(got, gone) {
				t.Errorf("%q still in the kernel after the partial sync", gone)
			}
		}
		for _, want := range []string{"affinity-default/sticky/tcp/80/10.244.4.1_8080-t1200", "192.0.2.30 . tcp . 80 : goto external-default/new/tcp/80", "10.96.0.15 . tcp . 80 : goto refuse-default/many/tcp/80", "tcp . 30090 : goto refuse-default/local/tcp/80", "chain refuse-default/many/tcp/80"} {
			if !strings.Contains(got, want) {
				t.Errorf("kernel lacks %q after the partial sync", want)
			}
		}
		checkTCP(t, "10.0.0.1:30080", "hello")
		// A periodic full sync on top of that changes nothing in effect;
		// the affinity entries the traffic test made survive it (only
		// their countdown moves).
		mustSync(t, p, fullRequest(w.snap))
		again := sh(t, "nft list table ip portal")
		if !strings.Contains(again, "10.0.0.1 expires") {
			t.Error("the full resync dropped the affinity entries")
		}
		// A full sync rewrites every chain, so counters start again.
		strip := func(s string) string { return counters.ReplaceAllString(expires.ReplaceAllString(s, ""), "") }
		if a, b := strip(got), strip(again); a != b {
			t.Errorf("full resync changed the table:\n%s", diffLines(a, b))
		}
	})

	t.Run("a restarted proxy removes what it no longer wants", func(t *testing.T) {
		// Another instance, as after a restart, with fewer Services: its
		// first full sync finds the leftovers by listing the table.
		// An older version's map pointing at its own chain must go too.
		sh(t, "nft add chain ip portal old-chain && nft add map ip portal old-map '{ type ipv4_addr : verdict ; }' && nft add element ip portal old-map '{ 1.2.3.4 : goto old-chain }'")
		fresh := newProxier()
		small := newWorld()
		small.set(svc("default/web", "10.96.0.10"), endpointsFor("http", v1.ProtocolTCP, ep("10.0.0.1:8080", "local")))
		mustSync(t, fresh, fullRequest(small.snap))
		got := sh(t, "nft list table ip portal")
		for _, gone := range []string{"default/new", "affinity-", "default/udp", "external-default/web", "old-map", "old-chain"} {
			if strings.Contains(got, gone) {
				t.Errorf("leftover %q survived the restart", gone)
			}
		}
		checkTCP(t, "10.96.0.10:80", "hello")
	})

	t.Run("nodeport-addresses as a set", func(t *testing.T) {
		w.snap.Node = &snapshot.Node{Name: "node1", NodePorts: snapshot.NodePortAddresses{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}}}
		p2 := newProxier()
		mustSync(t, p2, fullRequest(w.snap))
		checkTCP(t, "10.0.0.1:30080", "hello")
	})

	t.Run("cleanup leaves no portal table", func(t *testing.T) {
		if err := p.Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Cleanup(ctx); err != nil {
			t.Fatalf("second Cleanup (nothing left): %v", err)
		}
		if got := sh(t, "nft list tables"); strings.Contains(got, "portal") {
			t.Errorf("tables after cleanup:\n%s", got)
		}
		if err := leftovers.DeleteNFTables(ctx); err != nil {
			t.Errorf("DeleteNFTables with nothing to delete: %v", err)
		}
	})
}

var expires = regexp.MustCompile(` expires [0-9hms]+`)

// counters matches the values nft lists after a counter statement.
var counters = regexp.MustCompile(` packets \d+ bytes \d+`)

// kernelWorld is a realistic mix of every kind of Service.
func kernelWorld() *world {
	w := newWorld()
	many := make([]*snapshot.Endpoint, 40)
	for i := range many {
		many[i] = ep(fmt.Sprintf("10.244.8.%d:80", i+1))
	}
	w.set(svc("default/web", "10.96.0.10,fd00:96::10", port("http", v1.ProtocolTCP, 80, 30080)),
		endpointsFor("http", v1.ProtocolTCP, ep("10.0.0.1:8080", "local"), ep("[fd00::1]:8080", "local")))
	w.set(svc("default/web2", "10.96.0.20"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.5:8080", "local"), ep("10.244.2.7:8080")))
	w.set(svc("default/none", "10.96.0.11", port("http", v1.ProtocolTCP, 80, 0), port("dns", v1.ProtocolUDP, 53, 0)), nil)
	w.set(svc("default/spread", "10.96.0.21"), endpointsFor("http", v1.ProtocolTCP, ep("10.0.0.1:8080"), ep("10.0.0.1:8081")))
	w.set(svc("default/pinned", "10.96.0.22", affinity(time.Minute)), endpointsFor("http", v1.ProtocolTCP, ep("10.0.0.1:8080"), ep("10.0.0.1:8081")))
	w.set(svc("default/udp", "10.96.0.12", port("dns", v1.ProtocolUDP, 53, 0)), endpointsFor("dns", v1.ProtocolUDP, ep("10.0.0.1:5353", "local")))
	w.set(svc("default/unready", "10.96.0.13"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.9:8080", "unready")))
	w.set(svc("default/lb", "10.96.0.14,fd00:96::14", port("http", v1.ProtocolTCP, 80, 30081), lbVIPs("192.0.2.10", "2001:db8::10"), sourceRanges("203.0.113.0/24", "2001:db8:1::/48"), externalIPs("192.0.2.11")),
		endpointsFor("http", v1.ProtocolTCP, ep("10.0.0.1:8080", "node=node2"), ep("[fd00:244::8]:8080")))
	// Overlapping ranges, and ranges covering the VIP: the kernel
	// refuses overlapping intervals if they reach it.
	w.set(svc("default/open", "10.96.0.23,fd00:96::23", lbVIPs("192.0.2.77", "2001:db8::77"), sourceRanges("10.0.0.0/8", "10.1.0.0/16", "192.0.2.0/24", "0.0.0.0/0", "::/0", "2001:db8::/32")),
		endpointsFor("http", v1.ProtocolTCP, ep("10.0.0.1:8080"), ep("[fd00::1]:8080")))
	w.set(svc("default/many", "10.96.0.15"), endpointsFor("http", v1.ProtocolTCP, many...))
	w.set(svc("default/sticky", "10.96.0.16,fd00:96::16", affinity(10*time.Minute)), endpointsFor("http", v1.ProtocolTCP, ep("10.244.4.1:8080"), ep("10.244.4.2:8080"), ep("[fd00:244::4]:8080")))
	w.set(svc("default/local", "10.96.0.17", port("http", v1.ProtocolTCP, 80, 30090), externalLocal), endpointsFor("http", v1.ProtocolTCP, ep("10.0.0.1:8080", "node=node2")))
	w.set(svc("default/ilocal", "10.96.0.18", internalLocal), endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.9:8080"), ep("10.244.1.10:8080", "local")))
	w.set(svc("default/sctp", "10.96.0.19", port("s", v1.ProtocolSCTP, 9000, 30091)), endpointsFor("s", v1.ProtocolSCTP, ep("10.244.3.1:9000"), ep("10.244.3.2:9000", "terminating")))
	return w
}

// setupLinks gives the namespace a link with addresses and routes to the
// Service ranges, and servers for the endpoints at 10.0.0.1 / fd00::1.
func setupLinks(t *testing.T) {
	sh(t, `ip link set lo up &&
ip link add v0 type veth peer name v1 && ip link set v1 up && ip link set v0 up &&
ip addr add 10.0.0.1/24 dev v0 && ip -6 addr add fd00::1/64 dev v0 nodad &&
ip route add 10.96.0.0/16 dev v0 && ip -6 route add fd00:96::/64 dev v0 &&
ip route add 192.0.2.0/24 dev v0 && ip addr add 203.0.113.5/32 dev lo`)
	for addr, body := range map[string]string{"10.0.0.1:8080": "hello", "[fd00::1]:8080": "hello", "10.0.0.1:8081": "hello-2"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, body)
				c.Close()
			}
		}()
	}
	pc, err := net.ListenPacket("udp", "10.0.0.1:5353")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("udp:"), buf[:n]...), from)
		}
	}()
}

func sh(t *testing.T, script string) string {
	t.Helper()
	out, err := exec.Command("sh", "-ec", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

func checkTCP(t *testing.T, addr, want string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Errorf("dial %s: %v", addr, err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	got, _ := io.ReadAll(c)
	if string(got) != want {
		t.Errorf("%s: got %q, want %q", addr, got, want)
	}
}

func checkTCPFrom(t *testing.T, src, addr, want string) {
	t.Helper()
	d := &net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Errorf("dial %s from %s: %v", addr, src, err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if got, _ := io.ReadAll(c); string(got) != want {
		t.Errorf("%s from %s: got %q, want %q", addr, src, got, want)
	}
}

// bodies dials addr n times and returns the distinct answers.
func bodies(t *testing.T, addr string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Errorf("dial %s: %v", addr, err)
			return seen
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		seen[string(b)]++
	}
	return seen
}

func checkUDPRefused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	c.Write([]byte("x"))
	_, err = c.Read(make([]byte, 10))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("UDP to %s: got %v, want connection refused (ICMP port unreachable)", addr, err)
	}
}

func checkRefused(t *testing.T, addr string) {
	t.Helper()
	start := time.Now()
	_, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s: got %v, want connection refused", addr, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("dial %s: refused only after %v", addr, d)
	}
}

func checkUDP(t *testing.T, addr, want string) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, strings.TrimPrefix(want, "udp:"))
}

func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "udp:"+msg {
		t.Errorf("UDP round trip via %s: got %q, %v", c.RemoteAddr(), buf[:n], err)
	}
}

// findFlow counts UDP conntrack entries to dst answered by replySrc.
func findFlow(t *testing.T, ct conntrack.Exec, dst, replySrc string) int {
	t.Helper()
	entries, err := ct.List(context.Background(), v1.IPv4Protocol, v1.ProtocolUDP)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.OrigDst.String() == dst && e.ReplySrc.String() == replySrc {
			n++
		}
	}
	return n
}

// excerpt returns the chain and map lines of the listing that mention
// any of the given strings, with their chain headers.
func excerpt(listing string, keys ...string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(listing))
	inChain := false
	for sc.Scan() {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trim, "chain "):
			inChain = containsAny(trim, keys)
			if inChain {
				b.WriteString(line + "\n")
			}
		case trim == "}":
			if inChain {
				b.WriteString(line + "\n")
			}
			inChain = false
		case inChain || containsAny(trim, keys):
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func containsAny(s string, keys []string) bool {
	for _, k := range keys {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}
