package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// TestProxyUserspace holds what only the userspace mode promises: a
// backend that dies before the API knows costs clients nothing (the proxy
// retries the next endpoint), and the data path's counters are in
// /metrics.
func TestProxyUserspace(t *testing.T) {
	pb := newProxyBed(t, "userspace")
	const killed = "killed-b"
	var killBackend func()
	for i, name := range []string{"alive-a", killed} {
		ip := netip.AddrFrom4([4]byte{10, 244, 0, byte(60 + i)})
		pod := pb.bed.Pod(name, pb.node, "tb0", ip.String()+"/24", podGateway)
		b := pod.Serve(name, ip, 8080)
		pb.pods[name] = pod
		makePod(t, pb.c, pb.ns, podSpec{name: name, node: "node1", ip: ip.String(), labels: map[string]string{"app": "retry"}, ready: true})
		if name == killed {
			killBackend = b.Close
		}
	}
	svc := pb.service("retry", func(s *corev1.Service) {
		s.Annotations = map[string]string{"portal.dev/scheduler": "rr"}
	})
	vip := hostPort(svc.Spec.ClusterIP, 80)
	eventually(t, "both backends in rotation", func() (bool, string) {
		counts := spread(t, pb.node, "", vip, 10)
		return len(counts) == 2, fmt.Sprint(counts)
	})

	t.Run("a killed backend costs no failed connection", func(t *testing.T) {
		// The pod stays Ready in the API: only the proxy's retry saves
		// the clients that the scheduler sends to the dead one.
		killBackend()
		counts := spread(t, pb.node, "", vip, 50)
		if len(counts) != 1 || counts["alive-a"] != 50 {
			t.Errorf("after killing %s got %v, want all 50 connections answered by alive-a", killed, counts)
		}
	})

	t.Run("per-endpoint counters in /metrics", func(t *testing.T) {
		code, body := httpGet(pb.node, "http://127.0.0.1:10249/metrics")
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", code, body)
		}
		for _, want := range []string{
			`portal_userspace_connections_total{endpoint="10.244.0.60:8080",port="tcp",service="default/retry"}`,
			`portal_userspace_connect_failures_total{endpoint="10.244.0.61:8080",port="tcp",service="default/retry"}`,
			`portal_userspace_bytes_total{direction="to_client",endpoint="10.244.0.60:8080",port="tcp",service="default/retry"}`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})

	t.Run("new Services cost no full sync", func(t *testing.T) {
		// The Service addresses on portal-vip are not the node's: were
		// they counted, every new ClusterIP would change the node's
		// addresses and the next sync would rewrite everything.
		before := fullSyncs(t, pb.node)
		for i, name := range []string{"extra-a", "extra-b"} {
			pb.backend(name+"-pod", name, "node1", byte(62+i), true)
			svc := pb.service(name, nil)
			eventually(t, name+" answers", func() (bool, string) {
				got, err := ask(pb.node, "", hostPort(svc.Spec.ClusterIP, 80))
				return err == nil && got == name+"-pod", fmt.Sprint(got, err)
			})
		}
		if after := fullSyncs(t, pb.node); after != before {
			t.Errorf("full syncs went from %d to %d while two Services were added, want partial syncs only", before, after)
		}
	})
}

// fullSyncs reads the proxy's count of full syncs from its /metrics.
func fullSyncs(t *testing.T, node *testbed.NS) int {
	t.Helper()
	code, body := httpGet(node, "http://127.0.0.1:10249/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "kubeproxy_sync_full_proxy_rules_duration_seconds_count "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("bad full sync count %q", line)
			}
			return n
		}
	}
	t.Fatalf("/metrics has no kubeproxy_sync_full_proxy_rules_duration_seconds_count")
	return 0
}

// TestProxyModeSwitch: switching a node from one proxy mode to another
// leaves nothing of the first behind (each mode removes the others' rules
// before its first sync), and `portal proxy --cleanup` after any mode
// leaves nothing at all. A standalone `portal proxy` walks through every
// ordered pair of modes, stopped in turn with SIGTERM and with kill -9
// (which gives it no chance to tidy up); at every step the Services work
// through the new mode and the kernel holds exactly that mode's state:
// the nftables tables, the PORTAL-* chains of iptables (nft and legacy
// backends), the portal-vip link with its addresses and local routes.
func TestProxyModeSwitch(t *testing.T) {
	sb := newSwitchBed(t)

	t.Run("every ordered pair of modes", func(t *testing.T) {
		// An Euler circuit through the six ordered pairs; each mode is
		// stopped once with SIGTERM and once with kill -9.
		steps := []struct {
			mode string
			stop syscall.Signal // how this mode is stopped before the next
		}{
			{"nftables", syscall.SIGKILL},
			{"iptables", syscall.SIGTERM},
			{"nftables", syscall.SIGTERM},
			{"userspace", syscall.SIGKILL},
			{"iptables", syscall.SIGKILL},
			{"userspace", syscall.SIGTERM},
			{"nftables", syscall.SIGTERM},
		}
		for i, st := range steps {
			name := st.mode
			if i > 0 {
				name = fmt.Sprintf("%s after %s (%s)", st.mode, steps[i-1].mode, unix.SignalName(steps[i-1].stop))
			}
			t.Run(name, func(t *testing.T) {
				p := sb.startProxy(st.mode)
				sb.onlyStateOf(t, st.mode)
				sb.servicesWork(t)
				p.stop(st.stop)
			})
			if t.Failed() {
				return
			}
		}
	})

	t.Run("--cleanup after each mode leaves nothing", func(t *testing.T) {
		for _, mode := range proxyModes {
			t.Run(mode, func(t *testing.T) {
				p := sb.startProxy(mode)
				sb.onlyStateOf(t, mode)
				sb.servicesWork(t)
				p.stop(syscall.SIGKILL)
				if out, err := sb.node.Run(framework.Binary(t), "proxy", "--cleanup"); err != nil {
					t.Fatalf("portal proxy --cleanup: %v\n%s", err, out)
				}
				if got := sb.state(t); !got.empty() {
					t.Errorf("after --cleanup the node still holds:\n%s", got)
				}
			})
		}
	})
}

// switchBed is a node running `portal server` without its proxy, with
// backends on its pod bridge, a client outside, and a few Services; tests
// run `portal proxy` in the node by hand.
type switchBed struct {
	*proxyBed
	vips      []string // the Services' cluster IPs
	checks    []func(t *testing.T)
	proxyArgs []string
}

func newSwitchBed(t *testing.T) *switchBed {
	pb := newProxyNet(t)
	pb.startServer("--advertise-address", nodeIP, "--disable", "dns,proxy,agent,ingress")

	sb := &switchBed{proxyBed: pb}
	for i, name := range []string{"web-a", "web-b"} {
		pb.backend(name, "web", "node1", byte(10+i), true)
	}
	pb.backend("solo-a", "solo", "node1", 20, true)
	web := pb.service("web", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	solo := pb.service("solo", nil)
	// No endpoints: the kernel modes write reject rules for it.
	empty := pb.service("empty", nil)
	sb.vips = []string{web.Spec.ClusterIP, solo.Spec.ClusterIP, empty.Spec.ClusterIP}
	sb.checks = []func(t *testing.T){
		func(t *testing.T) {
			eventually(t, "web's ClusterIP reaches both backends", func() (bool, string) {
				counts := spread(t, pb.node, "", hostPort(web.Spec.ClusterIP, 80), 12)
				return len(counts) == 2 && counts["web-a"]+counts["web-b"] == 12, fmt.Sprint(counts)
			})
		},
		func(t *testing.T) {
			if got := reachable(t, pb.client, "", hostPort(nodeIP, web.Spec.Ports[0].NodePort)); got != "web-a" && got != "web-b" {
				t.Errorf("web's NodePort from outside answered by %q", got)
			}
		},
		func(t *testing.T) {
			if got := reachable(t, pb.node, "", hostPort(solo.Spec.ClusterIP, 80)); got != "solo-a" {
				t.Errorf("solo's ClusterIP answered by %q, want solo-a", got)
			}
		},
		func(t *testing.T) {
			if err := refused(t, pb.node, "", hostPort(empty.Spec.ClusterIP, 80)); !strings.Contains(err.Error(), "refused") {
				t.Errorf("a Service without endpoints: got %v, want connection refused", err)
			}
		},
	}
	sb.proxyArgs = []string{"proxy", "--kubeconfig", pb.server.UserKubeconfig(t, "system:kube-proxy", pb.server.URL()), "--hostname-override", "node1",
		"--cluster-cidr", "10.244.0.0/16", "--healthz-bind-address", "127.0.0.1:10256", "--metrics-bind-address", "127.0.0.1:10249"}
	return sb
}

func (sb *switchBed) servicesWork(t *testing.T) {
	t.Helper()
	for _, check := range sb.checks {
		check(t)
	}
}

// runningProxy is one `portal proxy` process in the node.
type runningProxy struct {
	t   *testing.T
	cmd *exec.Cmd
	log string
}

func (sb *switchBed) startProxy(mode string) *runningProxy {
	t := sb.t
	log, err := os.CreateTemp(t.TempDir(), "proxy-"+mode+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	args := append(slices.Clone(sb.proxyArgs), "--proxy-mode", mode)
	p := &runningProxy{t: t, cmd: sb.node.Start(log, framework.Binary(t), args...), log: log.Name()}
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(p.log)
			t.Logf("%s proxy log:\n%s", mode, data)
		}
	})
	return p
}

// stop sends sig and waits for the process to end.
func (p *runningProxy) stop(sig syscall.Signal) {
	p.cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-done
		p.t.Errorf("the proxy did not stop within 20s of %s", unix.SignalName(sig))
	}
}

// kernelState is what the proxy modes may leave in the node's kernel.
type kernelState struct {
	nftTables   []string // "table ip portal" and the like
	chains      []string // lines naming PORTAL-* chains, per iptables tool
	vipLink     bool
	serviceAddr []string // lines of `ip addr` / local routes holding a cluster IP
	ipRules     []string // policy routing rules beyond the kernel's three
}

func (s kernelState) empty() bool {
	return len(s.nftTables) == 0 && len(s.chains) == 0 && !s.vipLink && len(s.serviceAddr) == 0 && len(s.ipRules) == 0
}

func (s kernelState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nftables tables: %q\n", s.nftTables)
	fmt.Fprintf(&b, "iptables lines: %d\n", len(s.chains))
	for _, l := range s.chains {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "link %s: %v\n", "portal-vip", s.vipLink)
	fmt.Fprintf(&b, "cluster IPs on links or in local routes: %q\n", s.serviceAddr)
	fmt.Fprintf(&b, "extra ip rules: %q\n", s.ipRules)
	return b.String()
}

// state reads the node's kernel. iptables is read through every backend
// whose tools are installed: Portal writes only through iptables-nft, and
// a chain in the legacy tables would be a leftover nobody removes.
func (sb *switchBed) state(t *testing.T) kernelState {
	t.Helper()
	var s kernelState
	for _, line := range strings.Split(sb.node.MustRun("nft", "list", "tables"), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "portal" {
			s.nftTables = append(s.nftTables, line)
		}
	}
	for _, tool := range []string{"iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			continue
		}
		out := sb.node.MustRun(tool)
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "PORTAL-") {
				s.chains = append(s.chains, tool+": "+line)
			}
		}
	}
	_, err := sb.node.Run("ip", "link", "show", "portal-vip")
	s.vipLink = err == nil
	listings := sb.node.MustRun("ip", "-o", "addr", "show") + sb.node.MustRun("ip", "route", "show", "table", "local")
	for _, line := range strings.Split(listings, "\n") {
		for _, vip := range sb.vips {
			if strings.Contains(line, " "+vip+" ") || strings.Contains(line, " "+vip+"/") {
				s.serviceAddr = append(s.serviceAddr, line)
			}
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(sb.node.MustRun("ip", "rule", "list")), "\n") {
		if !strings.HasPrefix(line, "0:") && !strings.HasPrefix(line, "32766:") && !strings.HasPrefix(line, "32767:") {
			s.ipRules = append(s.ipRules, line)
		}
	}
	return s
}

// onlyStateOf waits until the node's kernel holds what mode writes and
// nothing of the other modes. It also proves the reading sees each mode's
// state, so that an empty reading cannot pass for a clean one.
func (sb *switchBed) onlyStateOf(t *testing.T, mode string) {
	t.Helper()
	eventually(t, "only "+mode+"'s state in the kernel", func() (bool, string) {
		s := sb.state(t)
		var wrong []string
		if has := len(s.nftTables) > 0; has != (mode == "nftables") {
			wrong = append(wrong, fmt.Sprintf("nftables table portal present: %v", has))
		}
		var nat, filter bool
		for _, l := range s.chains {
			if strings.Contains(l, "legacy") {
				wrong = append(wrong, "iptables-legacy holds "+l)
			}
			nat = nat || strings.Contains(l, ":PORTAL-SVC-")
			filter = filter || strings.Contains(l, "REJECT")
		}
		if mode == "iptables" && !(nat && filter) {
			wrong = append(wrong, fmt.Sprintf("iptables mode's chains: service chains %v, reject rules %v", nat, filter))
		}
		if mode != "iptables" && len(s.chains) > 0 {
			wrong = append(wrong, "PORTAL-* iptables chains present")
		}
		if s.vipLink != (mode == "userspace") {
			wrong = append(wrong, fmt.Sprintf("link portal-vip present: %v", s.vipLink))
		}
		// userspace: each cluster IP is on the link and in the local table.
		if want := map[bool]int{true: 2 * len(sb.vips)}[mode == "userspace"]; len(s.serviceAddr) != want {
			wrong = append(wrong, fmt.Sprintf("%d lines hold cluster IPs, want %d", len(s.serviceAddr), want))
		}
		if len(s.ipRules) > 0 {
			wrong = append(wrong, "extra ip rules")
		}
		return len(wrong) == 0, strings.Join(wrong, "; ") + "\n" + s.String()
	})
}

// TestProxyUDPConntrack pins the UDP conntrack cases of kubernetes issues
// 59368, 48370 and 139628 in both kernel modes (19029, a flow through a
// ClusterIP moving off a removed backend, is in TestProxy): a client keeps
// one source port, so all its datagrams are one conntrack entry, and
// only the proxy's cleanup of that entry lets the flow follow the
// endpoints.
func TestProxyUDPConntrack(t *testing.T) {
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			pb := newProxyBed(t, mode)
			const wait = 300 * time.Millisecond
			relabel := func(pod, app string) {
				t.Helper()
				cur, err := pb.c.CoreV1().Pods(pb.ns).Get(context.Background(), pod, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				cur.Labels["app"] = app
				if _, err := pb.c.CoreV1().Pods(pb.ns).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			flow := func(ns *testbed.NS, addr string, port int) *testbed.UDPClient {
				t.Helper()
				u, err := ns.UDPClient(addr, port)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(u.Close)
				return u
			}

			t.Run("59368: a NodePort flow from outside moves off a removed backend", func(t *testing.T) {
				pb.backend("np-a", "np", "node1", 70, true)
				pb.backend("np-b", "np", "node1", 71, true)
				svc := pb.service("np", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
				u := flow(pb.client, hostPort(nodeIP, svc.Spec.Ports[1].NodePort), 41001)
				var first string
				eventually(t, "a UDP answer through the NodePort", func() (bool, string) {
					got, err := u.Ask(wait)
					first = got
					return err == nil, fmt.Sprint(err)
				})
				relabel(first, "gone")
				eventually(t, "the same flow answered by the other backend", func() (bool, string) {
					got, err := u.Ask(wait)
					return err == nil && got != first, fmt.Sprintf("%q %v", got, err)
				})
			})

			t.Run("48370: a flow that began before any endpoint reaches the first one", func(t *testing.T) {
				// The flow starts before the Service exists, so its
				// conntrack entry is not DNATed, and nothing will DNAT it
				// until the proxy deletes it.
				const cip = "10.96.200.48"
				u := flow(pb.node, hostPort(cip, 80), 41002)
				for range 3 {
					if got, err := u.Ask(wait); err == nil {
						t.Fatalf("an address without a Service answered %q", got)
					}
				}
				pb.service("late", func(s *corev1.Service) { s.Spec.ClusterIP = cip })
				for range 3 {
					if got, err := u.Ask(wait); err == nil {
						t.Fatalf("a Service without endpoints answered %q", got)
					}
				}
				pb.backend("late-a", "late", "node1", 72, true)
				eventually(t, "the same flow answered by the new endpoint", func() (bool, string) {
					got, err := u.Ask(wait)
					return err == nil && got == "late-a", fmt.Sprintf("%q %v", got, err)
				})
			})

			t.Run("139628: scaled to zero, a flow stops at once", func(t *testing.T) {
				pb.backend("zero-a", "zero", "node1", 73, true)
				svc := pb.service("zero", nil)
				u := flow(pb.node, hostPort(svc.Spec.ClusterIP, 80), 41003)
				eventually(t, "a UDP answer through the ClusterIP", func() (bool, string) {
					got, err := u.Ask(wait)
					return err == nil && got == "zero-a", fmt.Sprintf("%q %v", got, err)
				})
				// The pod leaves the Service but keeps serving: only a
				// stale conntrack entry could still reach it.
				relabel("zero-a", "gone")
				eventually(t, "the flow gets no answer", func() (bool, string) {
					got, err := u.Ask(wait)
					return err != nil, "still answered by " + got
				})
				for range 3 {
					if got, err := u.Ask(wait); err == nil {
						t.Errorf("after scaling to zero the flow was answered by %q", got)
					}
				}
			})
		})
	}
}
