package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"portal.dev/portal/e2e/framework"
)

// dnsUpstream is a name server on 127.0.0.1 (UDP and TCP) standing in for
// the upstream resolvers: it knows www.example. and nothing else.
func dnsUpstream(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if strings.EqualFold(r.Question[0].Name, "www.example.") && r.Question[0].Qtype == dns.TypeA {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: net.IPv4(192, 0, 2, 1)}}
		} else {
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})
	us, ts := &dns.Server{PacketConn: pc, Handler: h}, &dns.Server{Listener: l, Handler: h}
	go us.ActivateAndServe()
	go ts.ActivateAndServe()
	t.Cleanup(func() { us.Shutdown(); ts.Shutdown() })
	return pc.LocalAddr().String()
}

// digger runs the real dig against `portal dns`.
type digger struct {
	t    *testing.T
	port string
}

// short is `dig +short`, its lines sorted.
func (d digger) short(args ...string) []string {
	d.t.Helper()
	out := d.run(append([]string{"+short"}, args...)...)
	lines := strings.Fields(strings.TrimSpace(out))
	if strings.Contains(out, " ") { // SRV, SOA: whole lines
		lines = strings.Split(strings.TrimSpace(out), "\n")
	}
	slices.Sort(lines)
	return lines
}

func (d digger) run(args ...string) string {
	d.t.Helper()
	out, err := exec.Command("dig", append([]string{"@127.0.0.1", "-p", d.port, "+time=2", "+tries=1"}, args...)...).CombinedOutput()
	if err != nil {
		d.t.Fatalf("dig %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// status is the rcode dig prints, and whether the authority section holds
// the zone's SOA.
func (d digger) status(args ...string) (string, bool) {
	d.t.Helper()
	out := d.run(append([]string{"+noall", "+comments", "+authority"}, args...)...)
	var status string
	if i := strings.Index(out, "status: "); i >= 0 {
		status = strings.TrimRight(strings.Fields(out[i+len("status: "):])[0], ",")
	}
	return status, strings.Contains(out, "cluster.local.\t\t5\tIN\tSOA\tns.dns.cluster.local. hostmaster.cluster.local.")
}

func TestDNS(t *testing.T) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("dig not installed (Debian package bind9-dnsutils)")
	}
	s := framework.StartServer(t, "--disable", "dns,proxy,agent,ingress", "--node-monitor-grace-period", "1h")
	c := s.Client()
	ctx := context.Background()
	const ns = "dnstest"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	makeNode(t, c, "dns-node", "zone-a")

	// Services of every kind before DNS starts (its initial list), one more after.
	web := service("web")
	web.Spec.Selector = nil
	web.Spec.Ports = append(web.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	web, err := c.CoreV1().Services(ns).Create(ctx, web, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db := service("db")
	db.Spec.ClusterIP = corev1.ClusterIPNone
	db.Spec.Ports = []corev1.ServicePort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}}
	for _, svc := range []*corev1.Service{db,
		{ObjectMeta: metav1.ObjectMeta{Name: "manual"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "www.example"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "alias"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "web.dnstest.svc.cluster.local"}},
	} {
		if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	makePod(t, c, ns, podSpec{name: "db-0", node: "dns-node", ip: "10.5.0.10", labels: map[string]string{"app": "db"}, ready: true,
		hostname: "db-0", subdomain: "db", ports: []corev1.ContainerPort{{Name: "pg", ContainerPort: 5432}}})
	makePod(t, c, ns, podSpec{name: "db-1", node: "dns-node", ip: "10.5.0.11", labels: map[string]string{"app": "db"}, ready: true,
		ports: []corev1.ContainerPort{{Name: "pg", ContainerPort: 5432}}})
	makePod(t, c, ns, podSpec{name: "db-2", node: "dns-node", ip: "10.5.0.12", labels: map[string]string{"app": "db"}, ready: false,
		ports: []corev1.ContainerPort{{Name: "pg", ContainerPort: 5432}}})
	// A selector-less Service with a hand-written slice; the ready
	// condition unset counts as ready.
	_, err = c.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "manual-1", Labels: map[string]string{discoveryv1.LabelServiceName: "manual"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.6.0.1"}, Hostname: ptr.To("m1")},
			{Addresses: []string{"10.6.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	port := fmt.Sprint(framework.FreePort(t))
	health := fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))
	ready := fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))
	metrics := fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))
	framework.StartProcess(t, t.TempDir(), "dns", "--kubeconfig", s.UserKubeconfig(t, "system:kube-dns", s.URL()), "--dns-bind-address", "127.0.0.1",
		"--dns-port", port, "--upstream", dnsUpstream(t), "--health-bind-address", health, "--ready-bind-address", ready,
		"--metrics-bind-address", metrics)
	status := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Status
	}
	// /ready on its own port, as CoreDNS's ready plugin serves it.
	eventually(t, "portal dns ready on --ready-bind-address", func() (bool, string) {
		code, detail := status("http://" + ready + "/ready")
		return code == 200, detail
	})
	for _, g := range []struct {
		url  string
		want int
	}{
		{"http://" + ready + "/health", 404},
		{"http://" + health + "/health", 200},
		{"http://" + health + "/ready", 200},
	} {
		if code, detail := status(g.url); code != g.want {
			t.Errorf("GET %s: got %s, want %d", g.url, detail, g.want)
		}
	}
	d := digger{t: t, port: port}
	eventually(t, "db endpoints published", func() (bool, string) {
		got := d.short("db.dnstest.svc.cluster.local")
		return slices.Equal(got, []string{"10.5.0.10", "10.5.0.11"}), fmt.Sprint(got)
	})

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"ClusterIP A", []string{"web.dnstest.svc.cluster.local"}, []string{web.Spec.ClusterIP}},
		{"ClusterIP A, other case", []string{"WEB.DnsTest.svc.cluster.local"}, []string{web.Spec.ClusterIP}},
		{"ClusterIP A over TCP", []string{"+tcp", "web.dnstest.svc.cluster.local"}, []string{web.Spec.ClusterIP}},
		{"ClusterIP SRV", []string{"_dns._udp.web.dnstest.svc.cluster.local", "SRV"}, []string{"0 100 53 web.dnstest.svc.cluster.local."}},
		{"ClusterIP PTR", []string{"-x", web.Spec.ClusterIP}, []string{"web.dnstest.svc.cluster.local."}},
		{"headless A: ready pods only", []string{"db.dnstest.svc.cluster.local"}, []string{"10.5.0.10", "10.5.0.11"}},
		{"headless pod hostname/subdomain", []string{"db-0.db.dnstest.svc.cluster.local"}, []string{"10.5.0.10"}},
		{"headless pod without hostname", []string{"10-5-0-11.db.dnstest.svc.cluster.local"}, []string{"10.5.0.11"}},
		{"headless SRV", []string{"_pg._tcp.db.dnstest.svc.cluster.local", "SRV"},
			[]string{"0 50 5432 10-5-0-11.db.dnstest.svc.cluster.local.", "0 50 5432 db-0.db.dnstest.svc.cluster.local."}},
		{"headless PTR", []string{"-x", "10.5.0.10"}, []string{"db-0.db.dnstest.svc.cluster.local."}},
		{"manual slice A", []string{"manual.dnstest.svc.cluster.local"}, []string{"10.6.0.1"}},
		{"manual slice hostname", []string{"m1.manual.dnstest.svc.cluster.local"}, []string{"10.6.0.1"}},
		{"manual slice SRV", []string{"_http._tcp.manual.dnstest.svc.cluster.local", "SRV"}, []string{"0 100 8080 m1.manual.dnstest.svc.cluster.local."}},
		{"ExternalName", []string{"ext.dnstest.svc.cluster.local"}, []string{"www.example."}},
		{"ExternalName into the zone", []string{"alias.dnstest.svc.cluster.local"}, []string{web.Spec.ClusterIP, "web.dnstest.svc.cluster.local."}},
		{"pod record", []string{"10-5-0-12.dnstest.pod.cluster.local"}, []string{"10.5.0.12"}},
		{"dns-version", []string{"dns-version.cluster.local", "TXT"}, []string{`"1.1.0"`}},
		{"NS", []string{"cluster.local", "NS"}, []string{"ns.dns.cluster.local."}},
		{"forwarded upstream", []string{"www.example"}, []string{"192.0.2.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := digger{t: t, port: port}
			if got := d.short(tc.args...); !slices.Equal(got, tc.want) {
				t.Errorf("dig %v: got %q, want %q", tc.args, got, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		name, qname, qtype, want string
	}{
		{"missing service", "nope.dnstest.svc.cluster.local", "A", "NXDOMAIN"},
		{"missing namespace", "web.nope.svc.cluster.local", "A", "NXDOMAIN"},
		{"not-ready pod hostname", "10-5-0-12.db.dnstest.svc.cluster.local", "A", "NXDOMAIN"},
		{"below an ExternalName", "x.ext.dnstest.svc.cluster.local", "A", "NXDOMAIN"},
		{"pod in a missing namespace", "10-5-0-12.nope.pod.cluster.local", "A", "NXDOMAIN"},
		{"NODATA: AAAA of an IPv4 service", "web.dnstest.svc.cluster.local", "AAAA", "NOERROR"},
		{"NODATA: existing namespace", "dnstest.svc.cluster.local", "A", "NOERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := digger{t: t, port: port}
			status, soa := d.status(tc.qname, tc.qtype)
			if status != tc.want || !soa {
				t.Errorf("dig %s %s: got %s (SOA in authority: %v), want %s with SOA", tc.qname, tc.qtype, status, soa, tc.want)
			}
		})
	}

	t.Run("miekg client: SRV additional section, AA, case echoed", func(t *testing.T) {
		m := new(dns.Msg)
		m.SetQuestion("_PG._TCP.db.dnstest.svc.cluster.local.", dns.TypeSRV)
		m.SetEdns0(1232, false)
		resp, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, "127.0.0.1:"+port)
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Authoritative || len(resp.Answer) != 2 || resp.Answer[0].Header().Name != m.Question[0].Name {
			t.Errorf("got %v, want 2 authoritative SRV records named as asked", resp)
		}
		var glue []string
		for _, rr := range resp.Extra {
			if a, ok := rr.(*dns.A); ok {
				glue = append(glue, a.Hdr.Name+" "+a.A.String())
			}
		}
		slices.Sort(glue)
		want := []string{"10-5-0-11.db.dnstest.svc.cluster.local. 10.5.0.11", "db-0.db.dnstest.svc.cluster.local. 10.5.0.10"}
		if !slices.Equal(glue, want) {
			t.Errorf("additional: got %q, want %q", glue, want)
		}
		if resp.IsEdns0() == nil {
			t.Errorf("OPT: got none, want EDNS echoed")
		}
	})

	t.Run("changes: a new service appears, a deleted one disappears", func(t *testing.T) {
		d := digger{t: t, port: port}
		late := service("late")
		late.Spec.Selector = nil
		late, err := c.CoreV1().Services(ns).Create(ctx, late, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "late.dnstest resolves", func() (bool, string) {
			got := d.short("late.dnstest.svc.cluster.local")
			return slices.Equal(got, []string{late.Spec.ClusterIP}), fmt.Sprint(got)
		})
		if err := c.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "web.dnstest gone", func() (bool, string) {
			status, _ := d.status("web.dnstest.svc.cluster.local", "A")
			return status == "NXDOMAIN", status
		})
		if err := c.CoreV1().Pods(ns).Delete(ctx, "db-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "db-1 leaves db.dnstest", func() (bool, string) {
			got := d.short("db.dnstest.svc.cluster.local")
			return slices.Equal(got, []string{"10.5.0.10"}), fmt.Sprint(got)
		})
	})

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for _, want := range []string{`coredns_dns_requests_total{family="1",proto="udp"`, `coredns_dns_responses_total{plugin="kubernetes",rcode="NXDOMAIN"`,
			"coredns_dns_request_duration_seconds_bucket", "coredns_cache_misses_total"} {
			if !strings.Contains(text, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}
