//go:build linux

package nftables

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/nftables/netlink"
	"portal.dev/portal/proxy/snapshot"
)

var withCIDR = Config{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/64")}}

func twoEndpoints() *snapshot.ServiceEndpoints {
	return endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.5:8080", "local"), ep("10.244.2.7:8080"))
}

// TestServiceRules checks, for each kind of Service, everything it adds to
// the table beyond the static skeleton.
func TestServiceRules(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		svc    *snapshot.Service
		eps    *snapshot.ServiceEndpoints
		want4  string
		want6  string
		expect func(t *testing.T, lines []string)
	}{{
		name: "ClusterIP with two endpoints",
		cfg:  withCIDR,
		svc:  svc("ns/a", "10.96.0.10"),
		eps:  twoEndpoints(),
		want4: `
add chain ip portal service-ns/a/tcp/80
add map ip portal endpoints-tcp-0 { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add rule ip portal service-ns/a/tcp/80 ip daddr 10.96.0.10 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000
add rule ip portal service-ns/a/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 2 offset 0 map @endpoints-tcp-0
add element ip portal hairpin { 10.244.1.5 . 10.244.1.5 }
add element ip portal endpoints-tcp-0 { 0 : 10.244.1.5 . 8080 }
add element ip portal endpoints-tcp-0 { 1 : 10.244.2.7 . 8080 }
add element ip portal service-ips { 10.96.0.10 . tcp . 80 : goto service-ns/a/tcp/80 }`,
	}, {
		name: "masquerade-all",
		cfg:  Config{MasqueradeAll: true},
		svc:  svc("ns/a", "10.96.0.10"),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.7:8080")),
		want4: `
add chain ip portal service-ns/a/tcp/80
add map ip portal endpoints-tcp-0 { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add rule ip portal service-ns/a/tcp/80 ip daddr 10.96.0.10 meta mark set meta mark | 0x00004000
add rule ip portal service-ns/a/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 1 offset 0 map @endpoints-tcp-0
add element ip portal endpoints-tcp-0 { 0 : 10.244.2.7 . 8080 }
add element ip portal service-ips { 10.96.0.10 . tcp . 80 : goto service-ns/a/tcp/80 }`,
	}, {
		name: "cluster CIDR unknown: no masquerade for cluster IP traffic, as kube-proxy",
		cfg:  Config{},
		svc:  svc("ns/a", "10.96.0.10"),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.7:8080")),
		want4: `
add chain ip portal service-ns/a/tcp/80
add map ip portal endpoints-tcp-0 { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add rule ip portal service-ns/a/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 1 offset 0 map @endpoints-tcp-0
add element ip portal endpoints-tcp-0 { 0 : 10.244.2.7 . 8080 }
add element ip portal service-ips { 10.96.0.10 . tcp . 80 : goto service-ns/a/tcp/80 }`,
	}, {
		name: "NodePort with Cluster policy masquerades external traffic",
		cfg:  withCIDR,
		svc:  svc("ns/b", "10.96.0.11", port("http", v1.ProtocolTCP, 80, 30080)),
		eps:  twoEndpoints(),
		want4: `
add chain ip portal external-ns/b/tcp/80
add chain ip portal service-ns/b/tcp/80
add map ip portal endpoints-tcp-0 { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add rule ip portal external-ns/b/tcp/80 meta mark set meta mark | 0x00004000 goto service-ns/b/tcp/80
add rule ip portal service-ns/b/tcp/80 ip daddr 10.96.0.11 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000
add rule ip portal service-ns/b/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 2 offset 0 map @endpoints-tcp-0
add element ip portal hairpin { 10.244.1.5 . 10.244.1.5 }
add element ip portal endpoints-tcp-0 { 0 : 10.244.1.5 . 8080 }
add element ip portal endpoints-tcp-0 { 1 : 10.244.2.7 . 8080 }
add element ip portal service-ips { 10.96.0.11 . tcp . 80 : goto service-ns/b/tcp/80 }
add element ip portal service-nodeports { tcp . 30080 : goto external-ns/b/tcp/80 }`,
	}, {
		name: "externalIPs",
		cfg:  withCIDR,
		svc:  svc("ns/c", "10.96.0.12", externalIPs("192.0.2.1", "2001:db8::1")),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.7:8080")),
		want4: `
add chain ip portal external-ns/c/tcp/80
add chain ip portal service-ns/c/tcp/80
add map ip portal endpoints-tcp-0 { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add rule ip portal external-ns/c/tcp/80 meta mark set meta mark | 0x00004000 goto service-ns/c/tcp/80
add rule ip portal service-ns/c/tcp/80 ip daddr 10.96.0.12 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000
add rule ip portal service-ns/c/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 1 offset 0 map @endpoints-tcp-0
add element ip portal endpoints-tcp-0 { 0 : 10.244.2.7 . 8080 }
add element ip portal service-ips { 10.96.0.12 . tcp . 80 : goto service-ns/c/tcp/80 }
add element ip portal service-ips { 192.0.2.1 . tcp . 80 : goto external-ns/c/tcp/80 }`,
		// The IPv6 externalIP is ignored: the Service has no IPv6 cluster IP.
	}, {
		name: "LoadBalancer with source ranges",
		cfg:  withCIDR,
		svc:  svc("ns/d", "10.96.0.13", port("http", v1.ProtocolTCP, 80, 30082), lbVIPs("192.0.2.10"), sourceRanges("203.0.113.0/24", "198.51.100.7/32")),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.7:8080")),
		want4: `
add chain ip portal external-ns/d/tcp/80
add chain ip portal service-ns/d/tcp/80
add map ip portal endpoints-tcp-0 { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add rule ip portal external-ns/d/tcp/80 meta mark set meta mark | 0x00004000 goto service-ns/d/tcp/80
add rule ip portal service-ns/d/tcp/80 ip daddr 10.96.0.13 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000
add rule ip portal service-ns/d/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 1 offset 0 map @endpoints-tcp-0
add element ip portal firewall-allow { 192.0.2.10 . tcp . 80 . 203.0.113.0/24 }
add element ip portal firewall-allow { 192.0.2.10 . tcp . 80 . 198.51.100.7/32 }
add element ip portal firewall-allow { 192.0.2.10 . tcp . 80 . 192.0.2.10 }
add element ip portal firewall-ips { 192.0.2.10 . tcp . 80 }
add element ip portal endpoints-tcp-0 { 0 : 10.244.2.7 . 8080 }
add element ip portal service-ips { 10.96.0.13 . tcp . 80 : goto service-ns/d/tcp/80 }
add element ip portal service-ips { 192.0.2.10 . tcp . 80 : goto external-ns/d/tcp/80 }
add element ip portal service-nodeports { tcp . 30082 : goto external-ns/d/tcp/80 }`,
	}, {
		// The kernel refuses overlapping intervals in firewall-allow.
		name: "LoadBalancer with overlapping source ranges",
		cfg:  withCIDR,
		svc:  svc("ns/d", "10.96.0.13", lbVIPs("192.0.2.10"), sourceRanges("10.1.0.0/16", "192.0.2.0/24", "10.0.0.0/8", "10.1.2.3/32", "10.0.0.0/8")),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.7:8080")),
		expect: func(t *testing.T, lines []string) {
			mustContain(t, lines,
				"add element ip portal firewall-allow { 192.0.2.10 . tcp . 80 . 10.0.0.0/8 }",
				"add element ip portal firewall-allow { 192.0.2.10 . tcp . 80 . 192.0.2.0/24 }")
			if n := countContaining(lines, "firewall-allow {"); n != 2 {
				t.Errorf("%d firewall-allow elements, want 2 (10.0.0.0/8 covers the others, 192.0.2.0/24 the VIP):\n%s", n, strings.Join(lines, "\n"))
			}
		},
	}, {
		name: "LoadBalancer open to everyone",
		cfg:  withCIDR,
		svc:  svc("ns/d", "10.96.0.13", lbVIPs("192.0.2.10"), sourceRanges("0.0.0.0/0", "203.0.113.0/24")),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.7:8080")),
		expect: func(t *testing.T, lines []string) {
			if n := countContaining(lines, "firewall-allow {"); n != 1 {
				t.Errorf("%d firewall-allow elements, want only 0.0.0.0/0:\n%s", n, strings.Join(lines, "\n"))
			}
			mustContain(t, lines, "add element ip portal firewall-allow { 192.0.2.10 . tcp . 80 . 0.0.0.0/0 }")
		},
	}, {
		name: "LoadBalancer with IPv4-only source ranges allows nobody over IPv6",
		cfg:  withCIDR,
		svc:  svc("ns/d", "10.96.0.13,fd00::13", lbVIPs("2001:db8::10"), sourceRanges("203.0.113.0/24")),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("[fd00:244::7]:8080")),
		expect: func(t *testing.T, lines []string) {
			mustContain(t, lines,
				"add element ip6 portal firewall-ips { 2001:db8::10 . tcp . 80 }",
				"add element ip6 portal firewall-allow { 2001:db8::10 . tcp . 80 . 2001:db8::10 }")
			mustNotContain(t, lines, "203.0.113.0/24")
		},
	}, {
		name: "externalTrafficPolicy Local: short-circuit for pods and the node, local endpoints for the rest",
		cfg:  withCIDR,
		svc:  svc("ns/e", "10.96.0.14", port("http", v1.ProtocolTCP, 80, 30083), lbVIPs("192.0.2.11"), externalLocal),
		eps:  twoEndpoints(),
		want4: `
add chain ip portal external-ns/e/tcp/80
add chain ip portal service-ns/e/tcp/80
add map ip portal endpoints-tcp-0 { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add rule ip portal external-ns/e/tcp/80 ip saddr 10.244.0.0/16 goto service-ns/e/tcp/80
add rule ip portal external-ns/e/tcp/80 fib saddr type local meta mark set meta mark | 0x00004000 goto service-ns/e/tcp/80
add rule ip portal external-ns/e/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 1 offset 65536 map @endpoints-tcp-0
add rule ip portal service-ns/e/tcp/80 ip daddr 10.96.0.14 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000
add rule ip portal service-ns/e/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 2 offset 0 map @endpoints-tcp-0
add element ip portal hairpin { 10.244.1.5 . 10.244.1.5 }
add element ip portal endpoints-tcp-0 { 0 : 10.244.1.5 . 8080 }
add element ip portal endpoints-tcp-0 { 1 : 10.244.2.7 . 8080 }
add element ip portal endpoints-tcp-0 { 65536 : 10.244.1.5 . 8080 }
add element ip portal service-ips { 10.96.0.14 . tcp . 80 : goto service-ns/e/tcp/80 }
add element ip portal service-ips { 192.0.2.11 . tcp . 80 : goto external-ns/e/tcp/80 }
add element ip portal service-nodeports { tcp . 30083 : goto external-ns/e/tcp/80 }`,
	}, {
		name: "externalTrafficPolicy Local without local endpoints drops external traffic",
		cfg:  withCIDR,
		svc:  svc("ns/e", "10.96.0.14", port("http", v1.ProtocolTCP, 80, 30083), externalIPs("192.0.2.12"), externalLocal),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.7:8080")),
		want4: `
add chain ip portal external-ns/e/tcp/80
add chain ip portal service-ns/e/tcp/80
add map ip portal endpoints-tcp-0 { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add rule ip portal external-ns/e/tcp/80 ip saddr 10.244.0.0/16 goto service-ns/e/tcp/80
add rule ip portal external-ns/e/tcp/80 fib saddr type local meta mark set meta mark | 0x00004000 goto service-ns/e/tcp/80
add rule ip portal service-ns/e/tcp/80 ip daddr 10.96.0.14 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000
add rule ip portal service-ns/e/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 1 offset 0 map @endpoints-tcp-0
add element ip portal endpoints-tcp-0 { 0 : 10.244.2.7 . 8080 }
add element ip portal no-endpoint-nodeports { tcp . 30083 : drop }
add element ip portal no-endpoint-services { 192.0.2.12 . tcp . 80 : drop }
add element ip portal service-ips { 10.96.0.14 . tcp . 80 : goto service-ns/e/tcp/80 }
add element ip portal service-ips { 192.0.2.12 . tcp . 80 : goto external-ns/e/tcp/80 }
add element ip portal service-nodeports { tcp . 30083 : goto external-ns/e/tcp/80 }`,
	}, {
		name: "internalTrafficPolicy Local without local endpoints drops cluster IP traffic",
		cfg:  withCIDR,
		svc:  svc("ns/f", "10.96.0.15", internalLocal),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.7:8080")),
		want4: `
add element ip portal no-endpoint-services { 10.96.0.15 . tcp . 80 : drop }`,
	}, {
		name: "internalTrafficPolicy Local with a NodePort: cluster IP to local, NodePort to all",
		cfg:  withCIDR,
		svc:  svc("ns/f", "10.96.0.15", port("http", v1.ProtocolTCP, 80, 30084), internalLocal),
		eps:  twoEndpoints(),
		want4: `
add chain ip portal cluster-ns/f/tcp/80
add chain ip portal external-ns/f/tcp/80
add chain ip portal service-ns/f/tcp/80
add map ip portal endpoints-tcp-0 { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add rule ip portal cluster-ns/f/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 2 offset 65536 map @endpoints-tcp-0
add rule ip portal external-ns/f/tcp/80 meta mark set meta mark | 0x00004000 goto cluster-ns/f/tcp/80
add rule ip portal service-ns/f/tcp/80 ip daddr 10.96.0.15 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000
add rule ip portal service-ns/f/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 1 offset 0 map @endpoints-tcp-0
add element ip portal hairpin { 10.244.1.5 . 10.244.1.5 }
add element ip portal endpoints-tcp-0 { 0 : 10.244.1.5 . 8080 }
add element ip portal endpoints-tcp-0 { 65536 : 10.244.1.5 . 8080 }
add element ip portal endpoints-tcp-0 { 65537 : 10.244.2.7 . 8080 }
add element ip portal service-ips { 10.96.0.15 . tcp . 80 : goto service-ns/f/tcp/80 }
add element ip portal service-nodeports { tcp . 30084 : goto external-ns/f/tcp/80 }`,
	}, {
		name: "no endpoints rejects on every frontend",
		cfg:  withCIDR,
		svc:  svc("ns/g", "10.96.0.16", port("dns", v1.ProtocolUDP, 53, 30053), externalIPs("192.0.2.13")),
		eps:  endpointsFor("dns", v1.ProtocolUDP, ep("10.244.2.7:53", "unready")),
		want4: `
add chain ip portal refuse-ns/g/udp/53
add rule ip portal refuse-ns/g/udp/53 counter goto reject-chain
add element ip portal no-endpoint-nodeports { udp . 30053 : goto refuse-ns/g/udp/53 }
add element ip portal no-endpoint-services { 10.96.0.16 . udp . 53 : goto refuse-ns/g/udp/53 }
add element ip portal no-endpoint-services { 192.0.2.13 . udp . 53 : goto refuse-ns/g/udp/53 }`,
	}, {
		name: "terminating endpoints stand in when none is ready",
		cfg:  Config{},
		svc:  svc("ns/h", "10.96.0.17"),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.7:8080", "terminating"), ep("10.244.2.8:8080", "unready")),
		want4: `
add chain ip portal service-ns/h/tcp/80
add map ip portal endpoints-tcp-0 { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add rule ip portal service-ns/h/tcp/80 meta l4proto tcp counter dnat ip to numgen random mod 1 offset 0 map @endpoints-tcp-0
add element ip portal endpoints-tcp-0 { 0 : 10.244.2.7 . 8080 }
add element ip portal service-ips { 10.96.0.17 . tcp . 80 : goto service-ns/h/tcp/80 }`,
	}, {
		name: "session affinity: per-endpoint sets with the timeout, looked up before the random choice",
		cfg:  Config{},
		svc:  svc("ns/i", "10.96.0.18", affinity(time.Hour)),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.7:8080"), ep("10.244.2.8:8080")),
		want4: `
add chain ip portal service-ns/i/tcp/80
add set ip portal affinity-ns/i/tcp/80/10.244.2.7_8080-t3600 { type ipv4_addr ; flags dynamic,timeout ; timeout 3600s ; }
add set ip portal affinity-ns/i/tcp/80/10.244.2.8_8080-t3600 { type ipv4_addr ; flags dynamic,timeout ; timeout 3600s ; }
add rule ip portal service-ns/i/tcp/80 counter
add rule ip portal service-ns/i/tcp/80 ip saddr @affinity-ns/i/tcp/80/10.244.2.7_8080-t3600 meta l4proto tcp update @affinity-ns/i/tcp/80/10.244.2.7_8080-t3600 { ip saddr } dnat to 10.244.2.7:8080
add rule ip portal service-ns/i/tcp/80 ip saddr @affinity-ns/i/tcp/80/10.244.2.8_8080-t3600 meta l4proto tcp update @affinity-ns/i/tcp/80/10.244.2.8_8080-t3600 { ip saddr } dnat to 10.244.2.8:8080
add rule ip portal service-ns/i/tcp/80 numgen random mod 2 0 meta l4proto tcp update @affinity-ns/i/tcp/80/10.244.2.7_8080-t3600 { ip saddr } dnat to 10.244.2.7:8080
add rule ip portal service-ns/i/tcp/80 meta l4proto tcp update @affinity-ns/i/tcp/80/10.244.2.8_8080-t3600 { ip saddr } dnat to 10.244.2.8:8080
add element ip portal service-ips { 10.96.0.18 . tcp . 80 : goto service-ns/i/tcp/80 }`,
	}, {
		name: "dual-stack SCTP",
		cfg:  withCIDR,
		svc:  svc("ns/j", "10.96.0.19,fd00::19", port("s", v1.ProtocolSCTP, 9000, 0)),
		eps:  endpointsFor("s", v1.ProtocolSCTP, ep("10.244.2.7:9000"), ep("[fd00:244::7]:9000")),
		want4: `
add chain ip portal service-ns/j/sctp/9000
add map ip portal endpoints-sctp-0 { typeof numgen random mod 1 : ip daddr . sctp dport ; }
add rule ip portal service-ns/j/sctp/9000 ip daddr 10.96.0.19 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000
add rule ip portal service-ns/j/sctp/9000 meta l4proto sctp counter dnat ip to numgen random mod 1 offset 0 map @endpoints-sctp-0
add element ip portal endpoints-sctp-0 { 0 : 10.244.2.7 . 9000 }
add element ip portal service-ips { 10.96.0.19 . sctp . 9000 : goto service-ns/j/sctp/9000 }`,
		want6: `
add chain ip6 portal service-ns/j/sctp/9000
add map ip6 portal endpoints-sctp-0 { typeof numgen random mod 1 : ip6 daddr . sctp dport ; }
add rule ip6 portal service-ns/j/sctp/9000 ip6 daddr fd00::19 ip6 saddr != fd00:244::/64 meta mark set meta mark | 0x00004000
add rule ip6 portal service-ns/j/sctp/9000 meta l4proto sctp counter dnat ip6 to numgen random mod 1 offset 0 map @endpoints-sctp-0
add element ip6 portal endpoints-sctp-0 { 0 : fd00:244::7 . 9000 }
add element ip6 portal service-ips { fd00::19 . sctp . 9000 : goto service-ns/j/sctp/9000 }`,
	}, {
		name: "IPv6 affinity set names carry no colons",
		cfg:  Config{},
		svc:  svc("ns/k", "fd00::20", affinity(10*time.Second)),
		eps:  endpointsFor("http", v1.ProtocolTCP, ep("[fd00:244::7]:8080")),
		expect: func(t *testing.T, lines []string) {
			mustContain(t, lines, "add set ip6 portal affinity-ns/k/tcp/80/fd00-244--7_8080-t10 { type ipv6_addr ; flags dynamic,timeout ; timeout 10s ; }",
				"add rule ip6 portal service-ns/k/tcp/80 meta l4proto tcp update @affinity-ns/k/tcp/80/fd00-244--7_8080-t10 { ip6 saddr } dnat to [fd00:244::7]:8080")
		},
	}, {
		name: "UDP and TCP on one port number are separate",
		cfg:  Config{},
		svc:  svc("ns/l", "10.96.0.21", port("dns", v1.ProtocolUDP, 53, 0), port("dns-tcp", v1.ProtocolTCP, 53, 0)),
		eps: &snapshot.ServiceEndpoints{ByPort: map[snapshot.PortKey][]*snapshot.Endpoint{
			{Name: "dns", Protocol: v1.ProtocolUDP}:     {ep("10.244.2.7:5353")},
			{Name: "dns-tcp", Protocol: v1.ProtocolTCP}: {ep("10.244.2.7:5353")},
		}},
		want4: `
add chain ip portal service-ns/l/tcp/53
add chain ip portal service-ns/l/udp/53
add map ip portal endpoints-tcp-0 { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add map ip portal endpoints-udp-0 { typeof numgen random mod 1 : ip daddr . udp dport ; }
add rule ip portal service-ns/l/tcp/53 meta l4proto tcp counter dnat ip to numgen random mod 1 offset 65536 map @endpoints-tcp-0
add rule ip portal service-ns/l/udp/53 meta l4proto udp counter dnat ip to numgen random mod 1 offset 0 map @endpoints-udp-0
add element ip portal endpoints-tcp-0 { 65536 : 10.244.2.7 . 5353 }
add element ip portal endpoints-udp-0 { 0 : 10.244.2.7 . 5353 }
add element ip portal service-ips { 10.96.0.21 . udp . 53 : goto service-ns/l/udp/53 }
add element ip portal service-ips { 10.96.0.21 . tcp . 53 : goto service-ns/l/tcp/53 }`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, f4, f6 := newFakeProxier(tc.cfg)
			w := newWorld()
			w.set(tc.svc, tc.eps)
			mustSync(t, p, fullRequest(w.snap))
			checkRefs(t, f4)
			checkRefs(t, f6)
			got4, got6 := serviceLines(f4), serviceLines(f6)
			if tc.expect != nil {
				tc.expect(t, append(got4, got6...))
				return
			}
			if want := lines(tc.want4); !equalLines(got4, want) {
				t.Errorf("IPv4 rules:\ngot:\n%s\nwant:\n%s", strings.Join(got4, "\n"), strings.Join(want, "\n"))
			}
			if want := lines(tc.want6); !equalLines(got6, want) {
				t.Errorf("IPv6 rules:\ngot:\n%s\nwant:\n%s", strings.Join(got6, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestStaticRules pins the skeleton every table has.
func TestStaticRules(t *testing.T) {
	p, f4, _ := newFakeProxier(Config{})
	mustSync(t, p, fullRequest(newWorld().snap))
	want := `
add table ip portal { comment "Portal service proxy, nftables mode" ; }
add chain ip portal endpoints-check
add chain ip portal filter-forward { type filter hook forward priority -110 ; }
add chain ip portal filter-input { type filter hook input priority -110 ; }
add chain ip portal filter-output { type filter hook output priority -110 ; }
add chain ip portal filter-output-post-dnat { type filter hook output priority -90 ; }
add chain ip portal filter-prerouting { type filter hook prerouting priority -110 ; }
add chain ip portal firewall-check
add chain ip portal masquerading
add chain ip portal nat-output { type nat hook output priority -100 ; }
add chain ip portal nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip portal nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip portal reject-chain
add chain ip portal services
add set ip portal firewall-allow { type ipv4_addr . inet_proto . inet_service . ipv4_addr ; flags interval ; comment "sources allowed to those VIPs" ; }
add set ip portal firewall-ips { type ipv4_addr . inet_proto . inet_service ; comment "load balancer VIPs with loadBalancerSourceRanges" ; }
add set ip portal hairpin { type ipv4_addr . ipv4_addr ; comment "endpoints that may reach themselves through a Service" ; }
add set ip portal nodeport-ips { type ipv4_addr ; comment "addresses accepting NodePorts (--nodeport-addresses)" ; }
add map ip portal no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "NodePorts without usable endpoints" ; }
add map ip portal no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "frontends without usable endpoints" ; }
add map ip portal service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "cluster IPs, externalIPs and load balancer VIPs" ; }
add map ip portal service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePorts" ; }
add rule ip portal endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services
add rule ip portal endpoints-check fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports
add rule ip portal filter-forward ct state new jump endpoints-check
add rule ip portal filter-input ct state new jump endpoints-check
add rule ip portal filter-output ct state new jump firewall-check
add rule ip portal filter-output-post-dnat ct state new jump endpoints-check
add rule ip portal filter-prerouting ct state new jump firewall-check
add rule ip portal firewall-check ip daddr . meta l4proto . th dport . ip saddr @firewall-allow return
add rule ip portal firewall-check ip daddr . meta l4proto . th dport @firewall-ips drop
add rule ip portal masquerading meta mark & 0x00004000 == 0x00004000 meta mark set meta mark ^ 0x00004000 masquerade fully-random
add rule ip portal masquerading ct status dnat ip saddr . ip daddr @hairpin masquerade fully-random
add rule ip portal nat-output jump services
add rule ip portal nat-postrouting jump masquerading
add rule ip portal nat-prerouting jump services
add rule ip portal reject-chain meta l4proto tcp reject with tcp reset
add rule ip portal reject-chain reject
add rule ip portal services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip portal services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports`
	if got := strings.TrimSpace(f4.Dump()); got != strings.TrimSpace(want) {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestNodePortAddresses(t *testing.T) {
	p, f4, f6 := newFakeProxier(Config{})
	w := newWorld()
	w.snap.Node = &snapshot.Node{Name: "node1", NodePorts: snapshot.NodePortAddresses{Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.5"), netip.MustParseAddr("2001:db8::5")}}}
	mustSync(t, p, fullRequest(w.snap))
	mustContain(t, strings.Split(f4.Dump(), "\n"),
		"add element ip portal nodeport-ips { 192.0.2.5 }",
		"add rule ip portal services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports",
		"add rule ip portal endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports")
	mustContain(t, strings.Split(f6.Dump(), "\n"),
		"add element ip6 portal nodeport-ips { 2001:db8::5 }",
		"add rule ip6 portal services ip6 daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports")
	mustNotContain(t, strings.Split(f4.Dump(), "\n"), "fib daddr type local")
}

// TestManyEndpointsMap checks that without affinity any number of
// endpoints is one rule and one slot per endpoint, each endpoint once.
func TestManyEndpointsMap(t *testing.T) {
	p, f4, _ := newFakeProxier(Config{})
	w := newWorld()
	var list []*snapshot.Endpoint
	for i := range 70 {
		list = append(list, ep(fmt.Sprintf("10.244.%d.%d:8080", i/200, i%200+1)))
	}
	w.set(svc("ns/big", "10.96.1.1"), endpointsFor("http", v1.ProtocolTCP, list...))
	mustSync(t, p, fullRequest(w.snap))
	checkRefs(t, f4)
	top := f4.Table.Chains["service-ns/big/tcp/80"]
	if len(top.Rules) != 1 || top.Rules[0].Rule != "meta l4proto tcp counter dnat ip to numgen random mod 70 offset 0 map @endpoints-tcp-0" {
		t.Fatalf("got rules %v, want one numgen map rule", top.Rules)
	}
	slots := map[string]string{}
	for _, e := range f4.Table.Maps["endpoints-tcp-0"].Elements {
		slots[e.Key[0]] = e.Value[0]
	}
	for i, e := range list {
		want := e.Addr.String() + " . 8080"
		if got := slots[fmt.Sprint(i)]; got != want {
			t.Errorf("slot %d: got %q, want %q", i, got, want)
		}
	}
	if len(slots) != len(list) {
		t.Errorf("got %d slots, want %d", len(slots), len(list))
	}
}

// TestManyEndpointsGroups checks that past groupSize endpoints an
// affinity chain first picks a group, weighted by its size, and that the
// choice stays uniform: each endpoint's probability is the product of the
// rule probabilities on its path.
func TestManyEndpointsGroups(t *testing.T) {
	p, f4, _ := newFakeProxier(Config{})
	w := newWorld()
	var list []*snapshot.Endpoint
	for i := range 70 {
		list = append(list, ep(fmt.Sprintf("10.244.%d.%d:8080", i/200, i%200+1)))
	}
	w.set(svc("ns/big", "10.96.1.1", affinity(time.Minute)), endpointsFor("http", v1.ProtocolTCP, list...))
	mustSync(t, p, fullRequest(w.snap))
	checkRefs(t, f4)
	chains := f4.Table.Chains
	top := chains["service-ns/big/tcp/80"]
	var rules []string
	for _, r := range top.Rules[1+len(list):] { // after the counter and the affinity lookups
		rules = append(rules, r.Rule)
	}
	want := []string{
		"numgen random mod 70 < 32 goto service-ns/big/tcp/80/g0",
		"numgen random mod 38 < 32 goto service-ns/big/tcp/80/g1",
		"goto service-ns/big/tcp/80/g2",
	}
	if !equalLines(rules, want) {
		t.Fatalf("top chain rules: got %q, want %q", rules, want)
	}
	for g, size := range []int{32, 32, 6} {
		c := chains[fmt.Sprintf("service-ns/big/tcp/80/g%d", g)]
		if c == nil || len(c.Rules) != size {
			t.Fatalf("group %d: got %v, want %d rules", g, c, size)
		}
		if !strings.HasPrefix(c.Rules[0].Rule, fmt.Sprintf("numgen random mod %d 0 ", size)) {
			t.Errorf("group %d first rule %q", g, c.Rules[0].Rule)
		}
	}
	// P(g0) = 32/70; P(g1) = 38/70 * 32/38 = 32/70; P(g2) = 38/70 * 6/38 = 6/70:
	// with a uniform choice inside each group, every endpoint gets 1/70.
}

// TestPartialSyncSendsOnlyTheDiff counts the operations of incremental
// transactions among many Services.
func TestPartialSyncSendsOnlyTheDiff(t *testing.T) {
	p, f4, _ := newFakeProxier(withCIDR)
	w := newWorld()
	for i := range 100 {
		w.set(svc(fmt.Sprintf("ns/s%d", i), fmt.Sprintf("10.96.1.%d", i+1)),
			endpointsFor("http", v1.ProtocolTCP, ep(fmt.Sprintf("10.244.1.%d:8080", i+1)), ep(fmt.Sprintf("10.244.2.%d:8080", i+1))))
	}
	mustSync(t, p, fullRequest(w.snap))
	before := sortedDump(f4)

	// One endpoint of one Service changes: its slot in the endpoint map
	// is replaced (delete, add) and nothing else; no rule changes, so
	// the kernel has nothing to re-validate.
	nn := w.set(svc("ns/s7", "10.96.1.8"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.8:8080"), ep("10.244.3.8:8080")))
	mustSync(t, p, partialRequest(w.snap, nn))
	if got := f4.LastTransaction.String(); !equalLines(lines(got), []string{
		"delete element ip portal endpoints-tcp-1 { 196609 }",
		"add element ip portal endpoints-tcp-1 { 196609 : 10.244.3.8 . 8080 }",
	}) {
		t.Errorf("endpoint change: got\n%s", got)
	}
	checkRefs(t, f4)

	// One more endpoint: the rule's modulus changes too.
	nn = w.set(svc("ns/s7", "10.96.1.8"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.8:8080"), ep("10.244.3.8:8080"), ep("10.244.4.8:8080")))
	mustSync(t, p, partialRequest(w.snap, nn))
	if got := f4.LastTransaction.NumOperations(); got != 5 {
		t.Errorf("endpoint added: got %d operations, want 5 (chain add, flush, two rules, one slot):\n%s", got, f4.LastTransaction)
	}

	// A new Service: chain (new, so no flush), its two rules, one slot,
	// one dispatch element.
	nn = w.set(svc("ns/new", "10.96.2.1"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.9.1:8080")))
	mustSync(t, p, partialRequest(w.snap, nn))
	if got := f4.LastTransaction.NumOperations(); got != 5 {
		t.Errorf("new Service: got %d operations, want 5:\n%s", got, f4.LastTransaction)
	}

	// Deleting it: the elements, then the chain (flush and delete).
	w.remove(nn)
	mustSync(t, p, partialRequest(w.snap, nn))
	if got := f4.LastTransaction.NumOperations(); got != 4 {
		t.Errorf("deleted Service: got %d operations, want 4:\n%s", got, f4.LastTransaction)
	}
	checkRefs(t, f4)

	// A change that changes nothing sends nothing.
	mustSync(t, p, partialRequest(w.snap, nn))
	if got := f4.LastTransaction.NumOperations(); got != 4 {
		t.Errorf("no-op change ran a transaction: %s", f4.LastTransaction)
	}

	// Putting the endpoints back: the table is as after the full sync
	// (map elements may come in another order).
	nn = w.set(svc("ns/s7", "10.96.1.8"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.8:8080"), ep("10.244.2.8:8080")))
	mustSync(t, p, partialRequest(w.snap, nn))
	if after := sortedDump(f4); after != before {
		t.Errorf("partial syncs diverged from the full sync:\n%s", diffLines(before, after))
	}
	// And a full sync of the same snapshot produces the same table: the
	// chains kept their slot ranges.
	mustSync(t, p, fullRequest(w.snap))
	if after := sortedDump(f4); after != before {
		t.Errorf("full sync differs:\n%s", diffLines(before, after))
	}
}

// TestPartialEqualsFull replays a sequence of changes through partial
// syncs and checks the table equals a fresh full sync after each.
func TestPartialEqualsFull(t *testing.T) {
	type change struct {
		name string
		svc  *snapshot.Service
		eps  *snapshot.ServiceEndpoints
		del  bool
	}
	a := svc("ns/a", "10.96.0.1,fd00::1", port("http", v1.ProtocolTCP, 80, 30001), externalIPs("192.0.2.1"))
	b := svc("ns/b", "10.96.0.2", port("dns", v1.ProtocolUDP, 53, 0), affinity(time.Minute))
	c := svc("ns/c", "10.96.0.3", lbVIPs("192.0.2.3"), sourceRanges("10.0.0.0/8"), port("http", v1.ProtocolTCP, 80, 30003), externalLocal)
	d := svc("ns/d", "10.96.0.4", externalIPs("192.0.2.1")) // same externalIP:port as a
	changes := []change{
		{"add a", a, endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.1:80", "local"), ep("[fd00:244::1]:80")), false},
		{"add b", b, endpointsFor("dns", v1.ProtocolUDP, ep("10.244.1.2:53"), ep("10.244.2.2:53")), false},
		{"add c without endpoints", c, nil, false},
		{"c gets a remote endpoint", c, endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.3:80")), false},
		{"c gets a local endpoint", c, endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.3:80"), ep("10.244.1.3:80", "local")), false},
		{"b loses an endpoint (its affinity set goes)", b, endpointsFor("dns", v1.ProtocolUDP, ep("10.244.2.2:53")), false},
		{"b affinity timeout changes", svc("ns/b", "10.96.0.2", port("dns", v1.ProtocolUDP, 53, 0), affinity(time.Hour)), endpointsFor("dns", v1.ProtocolUDP, ep("10.244.2.2:53")), false},
		{"d claims a's externalIP", d, endpointsFor("http", v1.ProtocolTCP, ep("10.244.2.4:80")), false},
		{"a drops its NodePort", svc("ns/a", "10.96.0.1,fd00::1", externalIPs("192.0.2.1")), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.1:80", "local"), ep("[fd00:244::1]:80")), false},
		{"a's endpoints become unready: reject", svc("ns/a", "10.96.0.1,fd00::1", externalIPs("192.0.2.1")), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.1:80", "unready")), false},
		{"c deleted", c, nil, true},
		{"b deleted", b, nil, true},
	}
	p, f4, f6 := newFakeProxier(withCIDR)
	w := newWorld()
	mustSync(t, p, fullRequest(w.snap))
	for _, ch := range changes {
		if ch.del {
			w.remove(ch.svc.Name)
		} else {
			w.set(ch.svc, ch.eps)
		}
		mustSync(t, p, partialRequest(w.snap, ch.svc.Name))
		checkRefs(t, f4)
		checkRefs(t, f6)
		fresh, g4, g6 := newFakeProxier(withCIDR)
		mustSync(t, fresh, fullRequest(w.snap))
		if got, want := canonicalDump(f4), canonicalDump(g4); got != want {
			t.Errorf("after %q, IPv4 partial differs from full:\n%s", ch.name, diffLines(want, got))
		}
		if got, want := canonicalDump(f6), canonicalDump(g6); got != want {
			t.Errorf("after %q, IPv6 partial differs from full:\n%s", ch.name, diffLines(want, got))
		}
	}
}

func TestFailedTransactionKeepsState(t *testing.T) {
	f4 := &failingFake{Fake: knftables.NewFake(knftables.IPv4Family, tableName)}
	p := NewWithInterfaces(Config{}, f4, nil)
	w := newWorld()
	nn := w.set(svc("ns/a", "10.96.0.1"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.1:80")))
	mustSync(t, p, fullRequest(w.snap))
	before := f4.Dump()

	w.set(svc("ns/a", "10.96.0.1"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.2:80")))
	f4.fail = true
	if err := p.Sync(context.Background(), partialRequest(w.snap, nn)); err == nil {
		t.Fatal("Sync: got no error from a failing transaction")
	}
	if f4.Dump() != before {
		t.Fatal("failed transaction changed the table")
	}
	f4.fail = false
	mustSync(t, p, fullRequest(w.snap))
	mustContain(t, strings.Split(f4.Dump(), "\n"), "add element ip portal endpoints-tcp-0 { 0 : 10.244.1.2 . 80 }")
}

// Someone flushes the ruleset (a firewall reload) and a Service goes
// away: the partial sync fails, and the full sync after it must not try to
// delete the Service's chains, which are gone, or it fails forever.
func TestFullSyncAfterTheTableWasRemoved(t *testing.T) {
	p, f4, _ := newFakeProxier(Config{})
	w := newWorld()
	a := w.set(svc("ns/a", "10.96.0.1", affinity(time.Minute)), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.1:80")))
	w.set(svc("ns/b", "10.96.0.2"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.2:80")))
	mustSync(t, p, fullRequest(w.snap))

	tx := f4.NewTransaction()
	tx.Delete(&knftables.Table{})
	if err := f4.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	w.remove(a)
	if err := p.Sync(context.Background(), partialRequest(w.snap, a)); err == nil {
		t.Fatal("partial sync into a removed table succeeded")
	}
	mustSync(t, p, fullRequest(w.snap))
	got := strings.Split(f4.Dump(), "\n")
	mustContain(t, got, "add element ip portal service-ips { 10.96.0.2 . tcp . 80 : goto service-ns/b/tcp/80 }")
	mustNotContain(t, got, "ns/a")
}

func TestFirstFullSyncDeletesLeftovers(t *testing.T) {
	p, f4, _ := newFakeProxier(Config{})
	// An earlier run left a Service chain, an affinity set and a map
	// this version no longer uses.
	tx := f4.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{Name: "service-old/gone/tcp/80"})
	tx.Add(&knftables.Rule{Chain: "service-old/gone/tcp/80", Rule: "meta l4proto tcp dnat to 10.1.1.1:80"})
	tx.Add(&knftables.Set{Name: "affinity-old/gone/tcp/80/10.1.1.1_80-t10800", Type: "ipv4_addr"})
	tx.Add(&knftables.Map{Name: "old-map", Type: "ipv4_addr : verdict"})
	if err := f4.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	mustSync(t, p, fullRequest(newWorld().snap))
	dump := f4.Dump()
	for _, gone := range []string{"service-old/gone", "affinity-old", "old-map"} {
		if strings.Contains(dump, gone) {
			t.Errorf("leftover %q survived the first full sync", gone)
		}
	}
}

func TestBeforeFirstSyncRunsOnce(t *testing.T) {
	calls := 0
	p, _, _ := newFakeProxier(Config{BeforeFirstSync: func(context.Context) error { calls++; return errors.New("no iptables") }})
	w := newWorld()
	mustSync(t, p, fullRequest(w.snap))
	mustSync(t, p, fullRequest(w.snap))
	if calls != 1 {
		t.Errorf("BeforeFirstSync ran %d times, want 1", calls)
	}
}

func TestCleanupDeletesTables(t *testing.T) {
	p, f4, f6 := newFakeProxier(Config{})
	w := newWorld()
	w.set(svc("ns/a", "10.96.0.1"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.1:80")))
	mustSync(t, p, fullRequest(w.snap))
	if err := p.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := f4.Dump() + f6.Dump(); d != "" {
		t.Errorf("tables left after Cleanup:\n%s", d)
	}
	// A sync after Cleanup starts over.
	mustSync(t, p, partialRequest(w.snap))
	mustContain(t, strings.Split(f4.Dump(), "\n"), "add element ip portal service-ips { 10.96.0.1 . tcp . 80 : goto service-ns/a/tcp/80 }")
}

type failingFake struct {
	*knftables.Fake
	fail bool
}

func (f *failingFake) Run(ctx context.Context, tx *knftables.Transaction) error {
	if f.fail {
		return errors.New("injected failure")
	}
	return f.Fake.Run(ctx, tx)
}

// TestPartialEqualsFullRandom drives random changes to a handful of
// Services (shared externalIPs and endpoints included, to exercise
// element ownership and hairpin counts) and checks after each partial
// sync that the table equals what a full sync of the same snapshot
// writes, and that nothing refers to a missing object.
func TestPartialEqualsFullRandom(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { partialEqualsFullRandom(t, seed) })
	}
}

func partialEqualsFullRandom(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	names := []string{"ns/a", "ns/b", "ns/c", "ns/d", "other/e"}
	randomService := func(i int) (*snapshot.Service, *snapshot.ServiceEndpoints) {
		var opts []svcOpt
		proto := []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}[rng.IntN(3)]
		nodePort := uint16(0)
		if rng.IntN(2) == 0 {
			nodePort = uint16(30000 + i)
		}
		opts = append(opts, port("p", proto, uint16(80+rng.IntN(2)), nodePort))
		if rng.IntN(3) == 0 {
			opts = append(opts, externalIPs("192.0.2.1")) // contested by design
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, lbVIPs(fmt.Sprintf("192.0.2.%d", 10+i)), sourceRanges("203.0.113.0/24"))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, affinity(time.Duration(1+rng.IntN(2))*time.Minute))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, externalLocal)
		}
		if rng.IntN(4) == 0 {
			opts = append(opts, internalLocal)
		}
		s := svc(names[i], fmt.Sprintf("10.96.0.%d,fd00::%d", i+1, i+1), opts...)
		var list []*snapshot.Endpoint
		for j := range rng.IntN(5) {
			flags := []string{}
			switch rng.IntN(4) {
			case 0:
				flags = append(flags, "local")
			case 1:
				flags = append(flags, "unready")
			case 2:
				flags = append(flags, "terminating")
			}
			// Few addresses, so Services share endpoints (hairpin refcounts).
			list = append(list, ep(fmt.Sprintf("10.244.0.%d:8080", 1+rng.IntN(4)+j%2), flags...), ep(fmt.Sprintf("[fd00:244::%d]:8080", 1+j), flags...))
		}
		return s, endpointsFor("p", proto, dedup(list)...)
	}
	p, f4, f6 := newFakeProxier(withCIDR)
	// Every sync is also encoded as netlink, as New's proxier would
	// send it, and must not need nft; the fakes then apply it.
	for _, fp := range p.set.Families {
		family := knftables.IPv4Family
		if fp.b.ip == "ip6" {
			family = knftables.IPv6Family
		}
		fp.batch = &encodeOnly{t: t, w: netlink.NewWriter(family, tableName)}
	}
	w := newWorld()
	mustSync(t, p, fullRequest(w.snap))
	for step := range 150 {
		i := rng.IntN(len(names))
		var changed []types.NamespacedName
		for range 1 + rng.IntN(2) {
			if rng.IntN(5) == 0 {
				nn := svc(names[i], "10.96.0.1").Name
				w.remove(nn)
				changed = append(changed, nn)
			} else {
				changed = append(changed, w.set(randomService(i)))
			}
			i = rng.IntN(len(names))
		}
		mustSync(t, p, partialRequest(w.snap, changed...))
		checkRefs(t, f4)
		checkRefs(t, f6)
		// Element order in the fake's dump is insertion order, which
		// differs between the two and means nothing: compare sorted.
		_, g4, g6 := newFakeProxierSynced(t, w.snap)
		if got, want := canonicalDump(f4), canonicalDump(g4); got != want {
			t.Fatalf("step %d (%v): IPv4 partial differs from full:\n%s", step, changed, diffLines(want, got))
		}
		if got, want := canonicalDump(f6), canonicalDump(g6); got != want {
			t.Fatalf("step %d (%v): IPv6 partial differs from full:\n%s", step, changed, diffLines(want, got))
		}
	}
}

// encodeOnly is a batchWriter that encodes a sync as netlink, fails the
// test if it cannot, and sends nothing, so knftables (a fake) applies it.
type encodeOnly struct {
	t *testing.T
	w *netlink.Writer
}

func (e *encodeOnly) Write(_ context.Context, rec *netlink.Recording) error {
	if rec.Len() == 0 {
		return nil
	}
	if _, err := e.w.Encode(rec); err != nil {
		e.t.Errorf("sync not encodable as netlink: %v", err)
		return err
	}
	return fmt.Errorf("%w: encode only", netlink.ErrNotSent)
}

func (e *encodeOnly) Wrote(rec *netlink.Recording) { e.w.Wrote(rec) }

// encodingWriter is a batchWriter that encodes a sync as netlink and, as
// if the kernel took it, sends nothing; size is the last batch's size.
type encodingWriter struct {
	w    *netlink.Writer
	size int
}

func (e *encodingWriter) Write(_ context.Context, rec *netlink.Recording) error {
	if rec.Len() == 0 {
		return nil
	}
	size, err := e.w.Encode(rec)
	if err != nil {
		return err
	}
	e.size = size
	e.w.Wrote(rec)
	return nil
}

func (e *encodingWriter) Wrote(rec *netlink.Recording) { e.w.Wrote(rec) }

func newFakeProxierSynced(t *testing.T, s *snapshot.Snapshot) (*Proxier, *knftables.Fake, *knftables.Fake) {
	p, f4, f6 := newFakeProxier(withCIDR)
	mustSync(t, p, fullRequest(s))
	return p, f4, f6
}

func sortedDump(f *knftables.Fake) string {
	l := strings.Split(f.Dump(), "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}

func dedup(eps []*snapshot.Endpoint) []*snapshot.Endpoint {
	seen := map[string]bool{}
	var out []*snapshot.Endpoint
	for _, e := range eps {
		if !seen[e.String()] {
			seen[e.String()] = true
			out = append(out, e)
		}
	}
	return out
}

// TestIDAllocator checks that chains keep their ids and that released
// ids are reused lowest first, so the endpoint maps stay few.
func TestIDAllocator(t *testing.T) {
	var a idAllocator
	for i, c := range []string{"a", "b", "c", "d"} {
		if got := a.get(c); got != uint32(i) {
			t.Errorf("get(%q) = %d, want %d", c, got, i)
		}
	}
	if got := a.get("b"); got != 1 {
		t.Errorf("get(b) again = %d, want 1", got)
	}
	a.release("c")
	a.release("a")
	a.release("nothing")
	for _, tc := range []struct {
		chain string
		want  uint32
	}{{"e", 0}, {"f", 2}, {"g", 4}} {
		if got := a.get(tc.chain); got != tc.want {
			t.Errorf("get(%q) = %d, want %d", tc.chain, got, tc.want)
		}
	}
	a.keepOnly(func(c string) bool { return c == "g" })
	if got := a.get("h"); got != 0 {
		t.Errorf("after keepOnly(g): get(h) = %d, want 0", got)
	}
	if got := a.get("g"); got != 4 {
		t.Errorf("g moved to %d", got)
	}
}
