package iptables

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// fakeRunner answers iptables-save with save[table] and records every
// iptables-restore input.
type fakeRunner struct {
	save     map[string]string
	restores []string
}

func (f *fakeRunner) run(_ context.Context, name string, args []string, stdin string) (string, error) {
	if strings.HasSuffix(name, "-save") {
		return f.save[args[1]], nil
	}
	f.restores = append(f.restores, stdin)
	return "", nil
}

func (f *fakeRunner) last() string { return f.restores[len(f.restores)-1] }

func nn(s string) types.NamespacedName {
	ns, n, _ := strings.Cut(s, "/")
	return types.NamespacedName{Namespace: ns, Name: n}
}

func service(name, cip string, mutate ...func(*snapshot.Service)) *snapshot.Service {
	s := &snapshot.Service{Name: nn(name), ClusterIPs: []netip.Addr{netip.MustParseAddr(cip)},
		Ports: []snapshot.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func endpoints(addrs ...string) *snapshot.ServiceEndpoints {
	var list []*snapshot.Endpoint
	for _, a := range addrs {
		ap := netip.MustParseAddrPort(a)
		list = append(list, &snapshot.Endpoint{Addr: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true, NodeName: "node1", Local: true})
	}
	return &snapshot.ServiceEndpoints{ByPort: map[snapshot.PortKey][]*snapshot.Endpoint{{Name: "http", Protocol: v1.ProtocolTCP}: list}}
}

func snap(svcs map[string]*snapshot.Service, eps map[string]*snapshot.ServiceEndpoints) *snapshot.Snapshot {
	s := &snapshot.Snapshot{Services: map[types.NamespacedName]*snapshot.Service{}, Endpoints: map[types.NamespacedName]*snapshot.ServiceEndpoints{},
		Node: &snapshot.Node{Name: "node1", NodePorts: snapshot.NodePortAddresses{All: true}, Eligible: true}}
	for k, v := range svcs {
		s.Services[nn(k)] = v
	}
	for k, v := range eps {
		s.Endpoints[nn(k)] = v
	}
	return s
}

func ids(name, port string) string { return name + ":" + port + "/tcp" }

func newTestProxier(f *fakeRunner) *Proxier {
	return NewWithTools(Config{Run: f.run, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
		[]Tool{{Family: "IPv4", Save: "iptables-nft-save", Restore: "iptables-nft-restore"}})
}

func TestRuleset(t *testing.T) {
	svcWeb := chainName("PORTAL-SVC-", ids("default/web", "http"))
	sepA := chainName("PORTAL-SEP-", ids("default/web", "http")+"/10.244.0.10:8080")
	sepB := chainName("PORTAL-SEP-", ids("default/web", "http")+"/10.244.0.11:8080")
	extLB := chainName("PORTAL-EXT-", ids("default/lb", "http"))
	fwLB := chainName("PORTAL-FW-", ids("default/lb", "http"))
	svlFar := chainName("PORTAL-SVL-", ids("default/far", "http"))
	tests := []struct {
		name    string
		svc     *snapshot.Service
		eps     *snapshot.ServiceEndpoints
		want    []string
		notWant []string
	}{
		{
			name: "cluster IP spreads with statistic, masquerades from outside the pod CIDR, hairpins",
			svc:  service("default/web", "10.96.0.10"),
			eps:  endpoints("10.244.0.10:8080", "10.244.0.11:8080"),
			want: []string{
				`-A PORTAL-SERVICES -m comment --comment "default/web:http" -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j ` + svcWeb,
				`-A ` + svcWeb + ` ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j PORTAL-MARK-MASQ`,
				`-A ` + svcWeb + ` -m statistic --mode random --probability 0.5000000000 -j ` + sepA,
				`-A ` + svcWeb + ` -j ` + sepB,
				`-A ` + sepA + ` -s 10.244.0.10/32 -j PORTAL-MARK-MASQ`,
				`-A ` + sepA + ` -p tcp -m tcp -j DNAT --to-destination 10.244.0.10:8080`,
			},
			notWant: []string{"REJECT", "recent"},
		},
		{
			name: "ClientIP affinity uses recent",
			svc:  service("default/web", "10.96.0.10", func(s *snapshot.Service) { s.AffinityTimeout = 3 * time.Hour }),
			eps:  endpoints("10.244.0.10:8080", "10.244.0.11:8080"),
			want: []string{
				`-A ` + svcWeb + ` -m recent --name ` + sepA + ` --rcheck --seconds 10800 --reap -j ` + sepA,
				`-A ` + sepA + ` -p tcp -m tcp -m recent --name ` + sepA + ` --set -j DNAT --to-destination 10.244.0.10:8080`,
			},
		},
		{
			name: "no endpoints rejects in the filter table, NodePort too",
			svc: service("default/empty", "10.96.0.11", func(s *snapshot.Service) {
				s.Ports[0].NodePort = 30080
			}),
			want: []string{
				`-A PORTAL-SERVICES -m comment --comment "default/empty:http" -d 10.96.0.11/32 -p tcp -m tcp --dport 80 -j REJECT`,
				`-A PORTAL-NODEPORTS -m comment --comment "default/empty:http" -p tcp -m tcp --dport 30080 -j REJECT`,
			},
			notWant: []string{"PORTAL-SVC-"},
		},
		{
			name: "LB VIP with source ranges goes through a firewall chain",
			svc: service("default/lb", "10.96.0.12", func(s *snapshot.Service) {
				s.LoadBalancerVIPs = []netip.Addr{netip.MustParseAddr("10.200.0.1")}
				s.SourceRanges = []netip.Prefix{netip.MustParsePrefix("10.100.0.2/32")}
			}),
			eps: endpoints("10.244.0.20:8080"),
			want: []string{
				`-A PORTAL-SERVICES -m comment --comment "default/lb:http" -d 10.200.0.1/32 -p tcp -m tcp --dport 80 -j ` + fwLB,
				`-A ` + fwLB + ` -s 10.100.0.2/32 -j ` + extLB,
				`-A ` + fwLB + ` -s 10.200.0.1/32 -j ` + extLB,
				`-A ` + fwLB + ` -j PORTAL-MARK-DROP`,
				`-A ` + extLB + ` -j PORTAL-MARK-MASQ`,
			},
		},
		{
			name: "external policy Local without local endpoints drops NodePort traffic",
			svc: service("default/far", "10.96.0.13", func(s *snapshot.Service) {
				s.Ports[0].NodePort = 30081
				s.ExternalPolicyLocal = true
			}),
			eps: func() *snapshot.ServiceEndpoints {
				e := endpoints("10.244.0.40:8080")
				e.ByPort[snapshot.PortKey{Name: "http", Protocol: v1.ProtocolTCP}][0].Local = false
				return e
			}(),
			want: []string{
				`-A PORTAL-NODEPORTS -m comment --comment "default/far:http" -p tcp -m tcp --dport 30081 -j DROP`,
				`:` + svlFar + ` - [0:0]`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{}
			p := newTestProxier(f)
			name := tc.svc.Name.String()
			s := snap(map[string]*snapshot.Service{name: tc.svc}, map[string]*snapshot.ServiceEndpoints{name: tc.eps})
			if err := p.Sync(context.Background(), snapshot.Request{Snapshot: s, Full: true}); err != nil {
				t.Fatal(err)
			}
			got := f.last()
			for _, w := range tc.want {
				if !strings.Contains(got, w+"\n") {
					t.Errorf("restore input lacks %q; got:\n%s", w, got)
				}
			}
			for _, nw := range tc.notWant {
				if strings.Contains(got, nw) {
					t.Errorf("restore input has %q; got:\n%s", nw, got)
				}
			}
		})
	}
}

func TestFullSyncJumpsAndLeftovers(t *testing.T) {
	tests := []struct {
		name        string
		save        map[string]string
		wantJumps   int
		wantDeleted []string
	}{
		{
			name:      "empty tables get every jump",
			save:      map[string]string{},
			wantJumps: len(jumps),
		},
		{
			name: "existing jumps are kept, leftover chains deleted",
			save: map[string]string{
				"nat": "*nat\n:PREROUTING ACCEPT [0:0]\n:PORTAL-SERVICES - [0:0]\n:PORTAL-SVC-OLD - [0:0]\n" +
					"-A PREROUTING -j PORTAL-SERVICES\n-A OUTPUT -j PORTAL-SERVICES\n-A POSTROUTING -j PORTAL-POSTROUTING\nCOMMIT\n",
				"filter": "*filter\n:PORTAL-XYZ - [0:0]\nCOMMIT\n",
			},
			wantJumps:   len(jumps) - 3,
			wantDeleted: []string{"-X PORTAL-SVC-OLD", "-X PORTAL-XYZ"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{save: tc.save}
			p := newTestProxier(f)
			if err := p.Sync(context.Background(), snapshot.Request{Snapshot: snap(nil, nil), Full: true}); err != nil {
				t.Fatal(err)
			}
			got := f.last()
			if n := strings.Count(got, "\n-I "); n != tc.wantJumps {
				t.Errorf("got %d jumps inserted, want %d:\n%s", n, tc.wantJumps, got)
			}
			for _, d := range tc.wantDeleted {
				if !strings.Contains(got, d+"\n") {
					t.Errorf("got no %q:\n%s", d, got)
				}
			}
		})
	}
}

func TestPartialSyncWritesOnlyChangedChains(t *testing.T) {
	web := service("default/web", "10.96.0.10")
	other := service("default/other", "10.96.0.20")
	before := snap(map[string]*snapshot.Service{"default/web": web, "default/other": other},
		map[string]*snapshot.ServiceEndpoints{"default/web": endpoints("10.244.0.10:8080", "10.244.0.11:8080"), "default/other": endpoints("10.244.0.30:8080")})
	id := ids("default/web", "http")
	svcWeb := chainName("PORTAL-SVC-", id)
	sepA := chainName("PORTAL-SEP-", id+"/10.244.0.10:8080")
	sepB := chainName("PORTAL-SEP-", id+"/10.244.0.11:8080")
	sepC := chainName("PORTAL-SEP-", id+"/10.244.0.12:8080")
	svcOther := chainName("PORTAL-SVC-", ids("default/other", "http"))

	tests := []struct {
		name    string
		svc     *snapshot.Service
		eps     *snapshot.ServiceEndpoints
		changed []string
		want    []string // in the partial restore; none: no restore at all
		notWant []string
	}{
		{
			name:    "endpoint replaced: its chain goes, the new one and the service chain are written, the dispatch chains are not",
			eps:     endpoints("10.244.0.10:8080", "10.244.0.12:8080"),
			changed: []string{"default/web"},
			want:    []string{":" + svcWeb + " - [0:0]", ":" + sepC + " - [0:0]", ":" + sepB + " - [0:0]", "-X " + sepB},
			notWant: []string{":" + sepA + " ", ":" + svcOther + " ", "-I ", ":PORTAL-SERVICES ", ":PORTAL-NODEPORTS ", "*filter"},
		},
		{
			name:    "nothing changed in a changed Service: no restore",
			eps:     endpoints("10.244.0.10:8080", "10.244.0.11:8080"),
			changed: []string{"default/web"},
		},
		{
			name:    "port changed: the dispatch chain is rewritten, with every Service's rules",
			svc:     service("default/web", "10.96.0.10", func(s *snapshot.Service) { s.Ports[0].Port = 81 }),
			eps:     endpoints("10.244.0.10:8080", "10.244.0.11:8080"),
			changed: []string{"default/web"},
			want:    []string{":PORTAL-SERVICES - [0:0]", "--dport 81 -j " + svcWeb, "-A PORTAL-SERVICES -m comment --comment \"default/other:http\""},
			notWant: []string{":PORTAL-NODEPORTS ", ":PORTAL-MARK-MASQ ", "*filter"},
		},
		{
			name:    "Service deleted: all its chains go",
			changed: []string{"default/web"},
			want:    []string{"-X " + svcWeb, "-X " + sepA, "-X " + sepB},
			notWant: []string{"default/web:http", ":" + svcOther + " "},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{}
			p := newTestProxier(f)
			if err := p.Sync(context.Background(), snapshot.Request{Snapshot: before, Full: true}); err != nil {
				t.Fatal(err)
			}
			svcs := map[string]*snapshot.Service{"default/other": other}
			eps := map[string]*snapshot.ServiceEndpoints{"default/other": endpoints("10.244.0.30:8080")}
			if tc.eps != nil {
				svcs["default/web"], eps["default/web"] = web, tc.eps
				if tc.svc != nil {
					svcs["default/web"] = tc.svc
				}
			}
			changed := map[types.NamespacedName]struct{}{}
			for _, c := range tc.changed {
				changed[nn(c)] = struct{}{}
			}
			if err := p.Sync(context.Background(), snapshot.Request{Snapshot: snap(svcs, eps), Changed: changed}); err != nil {
				t.Fatal(err)
			}
			if len(tc.want) == 0 {
				if len(f.restores) != 1 {
					t.Fatalf("got %d restores, want only the full sync's:\n%s", len(f.restores), f.last())
				}
				return
			}
			if len(f.restores) != 2 {
				t.Fatalf("got %d restores, want 2", len(f.restores))
			}
			got := f.last()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("partial restore lacks %q; got:\n%s", w, got)
				}
			}
			for _, nw := range tc.notWant {
				if strings.Contains(got, nw) {
					t.Errorf("partial restore has %q; got:\n%s", nw, got)
				}
			}
		})
	}
}

func TestProbability(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{2, "0.5000000000"}, {3, "0.3333333333"}, {10, "0.1000000000"}} {
		if got := probability(tc.n); got != tc.want {
			t.Errorf("probability(%d): got %s, want %s", tc.n, got, tc.want)
		}
	}
}

// TestLargeSyncInChunks: past maxChainsPerRestore per-Service chains, a
// sync writes them in several restores of whole Services ahead of the one
// that switches the dispatch chains over, so no restore is large enough
// for iptables-nft-restore's quadratic cost, and no Service's rules are
// ever half written.
func TestLargeSyncInChunks(t *testing.T) {
	const services, eps = 500, 5 // 3,000 chains: two chunks
	svcs := map[string]*snapshot.Service{}
	all := map[string]*snapshot.ServiceEndpoints{}
	for i := range services {
		name := fmt.Sprintf("default/web-%d", i)
		svcs[name] = service(name, netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}).String())
		var addrs []string
		for j := range eps {
			addrs = append(addrs, fmt.Sprintf("10.244.%d.%d:8080", i%200, j+1+i/200*10))
		}
		all[name] = endpoints(addrs...)
	}
	f := &fakeRunner{}
	p := newTestProxier(f)
	if err := p.Sync(context.Background(), snapshot.Request{Snapshot: snap(svcs, all), Full: true}); err != nil {
		t.Fatal(err)
	}
	if len(f.restores) != 3 {
		t.Fatalf("got %d restores, want 2 chunks and the dispatch", len(f.restores))
	}
	inputOf := map[string]int{} // chain -> restore that declares it
	for i, in := range f.restores {
		n := 0
		for _, line := range strings.Split(in, "\n") {
			if name, ok := strings.CutPrefix(line, ":"); ok {
				name, _, _ = strings.Cut(name, " ")
				inputOf[name] = i
				n++
			}
		}
		if i < 2 && n > maxChainsPerRestore+2 {
			t.Errorf("restore %d declares %d chains, want at most %d", i, n, maxChainsPerRestore+2)
		}
	}
	if inputOf[markMasqChain] != 0 && !strings.Contains(f.restores[0], ":"+markMasqChain+" ") {
		t.Errorf("the first chunk lacks %s, which per-Service chains jump to", markMasqChain)
	}
	if inputOf[servicesChain] != 2 || strings.Contains(f.restores[2], ":PORTAL-SVC-") {
		t.Errorf("the last restore must write the dispatch chains and no per-Service chain")
	}
	for i := range services {
		id := ids(fmt.Sprintf("default/web-%d", i), "http")
		svc := chainName("PORTAL-SVC-", id)
		sep := chainName("PORTAL-SEP-", id+"/"+all[fmt.Sprintf("default/web-%d", i)].ByPort[snapshot.PortKey{Name: "http", Protocol: v1.ProtocolTCP}][eps-1].AddrPort().String())
		if a, ok := inputOf[svc]; !ok || a == 2 || inputOf[sep] != a {
			t.Fatalf("Service web-%d: service chain in restore %d, its last endpoint chain in %d; want one chunk", i, inputOf[svc], inputOf[sep])
		}
	}
	if !strings.Contains(f.restores[2], "-I PREROUTING 1 -j PORTAL-SERVICES") {
		t.Error("the last restore lacks the jumps from the built-in chains")
	}
}
