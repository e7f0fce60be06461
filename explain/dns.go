package explain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Resolver asks the cluster DNS one question and returns its answer and
// which server gave it.
type Resolver interface {
	Query(ctx context.Context, name string, qtype uint16) (*dns.Msg, string, error)
}

// ErrNoDNS is returned when no cluster DNS server could be found or asked.
var ErrNoDNS = errors.New("the cluster DNS did not answer")

// dnsAsker asks the cluster DNS through a node's agent (nodeProxy).
type dnsAsker interface {
	DNSQuery(ctx context.Context, node, name string, qtype uint16) (*dns.Msg, string, error)
}

// clusterDNS asks the cluster DNS through a Ready node's agent first (its
// /dnsquery, behind nodes/NAME/proxy like /dial), so that a caller outside
// the cluster network, where neither the cluster IP nor the pods are
// routed, still sees what pods are told. When that fails (no nodes/proxy
// permission, an agent without /dnsquery) it asks the kube-system/kube-dns
// Service itself: its cluster IP first (what pods ask), then each server
// behind it (its EndpointSlices).
type clusterDNS struct {
	client  kubernetes.Interface
	nodes   dnsAsker
	timeout time.Duration

	once    sync.Once
	node    string // the Ready node whose agent is asked; "" when none
	servers []string
	findErr error

	mu        sync.Mutex
	preferred string // the server that last answered
	nodeErr   error  // why asking through node failed; then it is not asked again
}

// NewClusterDNS returns a Resolver that asks the cluster's own DNS, found
// through client as the kube-system/kube-dns Service.
func NewClusterDNS(client kubernetes.Interface) Resolver {
	return &clusterDNS{client: client, nodes: nodeProxy{client}, timeout: 300 * time.Millisecond}
}

// find finds the node to ask through and the cluster DNS servers.
func (c *clusterDNS) find(ctx context.Context) {
	if nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		var ready []string
		for i := range nodes.Items {
			if nodeReady(&nodes.Items[i]) {
				ready = append(ready, nodes.Items[i].Name)
			}
		}
		if len(ready) > 0 {
			c.node = slices.Min(ready)
		}
	}
	svc, err := c.client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		c.findErr = fmt.Errorf("kube-system/kube-dns: %w", err)
		return
	}
	port := "53"
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolUDP || p.Name == "dns" {
			port = fmt.Sprint(p.Port)
			break
		}
	}
	for _, ip := range svc.Spec.ClusterIPs {
		c.servers = append(c.servers, net.JoinHostPort(ip, port))
	}
	sl, err := c.client.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kube-dns"})
	if err != nil {
		return
	}
	for _, s := range sl.Items {
		epPort := port
		for _, p := range s.Ports {
			if p.Port != nil && p.Protocol != nil && *p.Protocol == corev1.ProtocolUDP {
				epPort = fmt.Sprint(*p.Port)
			}
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) > 0 && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				c.servers = append(c.servers, net.JoinHostPort(e.Addresses[0], epPort))
			}
		}
	}
	c.servers = slices.Compact(c.servers)
}

// Query asks the cluster DNS for name's records of qtype, through a
// node's agent, else directly.
func (c *clusterDNS) Query(ctx context.Context, name string, qtype uint16) (*dns.Msg, string, error) {
	c.once.Do(func() { c.find(ctx) })
	c.mu.Lock()
	viaNode := c.node != "" && c.nodeErr == nil
	c.mu.Unlock()
	if viaNode {
		r, server, err := c.nodes.DNSQuery(ctx, c.node, name, qtype)
		if err == nil {
			return r, server + " (from node " + c.node + ")", nil
		}
		c.mu.Lock()
		c.nodeErr = fmt.Errorf("through node %s: %w", c.node, err)
		c.mu.Unlock()
	}
	r, server, err := c.direct(ctx, name, qtype)
	if err != nil && c.node != "" {
		c.mu.Lock()
		err = fmt.Errorf("%w; %v", err, c.nodeErr)
		c.mu.Unlock()
	}
	return r, server, err
}

// direct asks the cluster DNS servers from this host.
func (c *clusterDNS) direct(ctx context.Context, name string, qtype uint16) (*dns.Msg, string, error) {
	if c.findErr != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrNoDNS, c.findErr)
	}
	c.mu.Lock()
	servers := slices.Clone(c.servers)
	if c.preferred != "" {
		servers = append([]string{c.preferred}, servers...)
	}
	c.mu.Unlock()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	client := &dns.Client{Timeout: c.timeout}
	var errs []string
	for _, s := range slices.Compact(servers) {
		r, _, err := client.ExchangeContext(ctx, m, s)
		if err == nil {
			c.mu.Lock()
			c.preferred = s
			c.mu.Unlock()
			return r, s, nil
		}
		errs = append(errs, s+": "+err.Error())
	}
	if len(errs) == 0 {
		return nil, "", fmt.Errorf("%w: kube-system/kube-dns has no address", ErrNoDNS)
	}
	return nil, "", fmt.Errorf("%w (%s)", ErrNoDNS, strings.Join(errs, "; "))
}

// dnsStep asks the cluster DNS for the Service's name (A, and AAAA when
// it has an IPv6 address) and its named ports' SRV records.
func (e *Explainer) dnsStep(ctx context.Context, svc *corev1.Service) Step {
	name := fmt.Sprintf("%s.%s.svc.%s", svc.Name, svc.Namespace, e.cfg.ClusterDomain)
	st := Step{Name: "dns", Status: StatusOK}
	r, server, err := e.cfg.DNS.Query(ctx, name, dns.TypeA)
	if err != nil {
		st.Status, st.Message = StatusWarning, "could not ask the cluster DNS: "+clean(err.Error())
		return st
	}
	st.Evidence = append(st.Evidence, fmt.Sprintf("asked %s: %s A -> %s %s", server, name, dns.RcodeToString[r.Rcode], answers(r)))
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if len(addrs(r)) == 0 && r.Rcode == dns.RcodeSuccess {
			// A name outside the zone comes back as the CNAME alone, as
			// from CoreDNS; whether it resolves is the next question.
			target := dns.Fqdn(svc.Spec.ExternalName)
			next, server, err := e.cfg.DNS.Query(ctx, target, dns.TypeA)
			if err != nil {
				st.Status, st.Message = StatusWarning, "could not ask the cluster DNS for the external name: "+clean(err.Error())
				return st
			}
			st.Evidence = append(st.Evidence, fmt.Sprintf("asked %s: %s A -> %s %s", server, clean(target), dns.RcodeToString[next.Rcode], answers(next)))
			r = next
		}
		return externalNameVerdict(st, svc, r)
	}
	got := addrs(r)
	if r.Rcode != dns.RcodeSuccess {
		st.Status, st.Message = StatusBroken, fmt.Sprintf("%s: %s from the cluster DNS", name, dns.RcodeToString[r.Rcode])
		return st
	}
	if slices.Contains(svc.Spec.IPFamilies, corev1.IPv6Protocol) {
		if r6, _, err := e.cfg.DNS.Query(ctx, name, dns.TypeAAAA); err == nil {
			st.Evidence = append(st.Evidence, fmt.Sprintf("%s AAAA -> %s %s", name, dns.RcodeToString[r6.Rcode], answers(r6)))
			got = append(got, addrs(r6)...)
		}
	}
	want := wantedAddrs(svc)
	if want != nil && !sameSet(got, want) {
		st.Status = StatusBroken
		st.Message = fmt.Sprintf("%s answers %s, the Service's cluster IP is %s", name, strings.Join(got, ","), strings.Join(want, ","))
		return st
	}
	if want == nil && len(got) == 0 {
		st.Status, st.Message = StatusWarning, fmt.Sprintf("%s (headless) has no address: no ready endpoint", name)
		return st
	}
	st.Message = fmt.Sprintf("%s -> %s", name, strings.Join(got, ","))
	for _, p := range svc.Spec.Ports {
		if p.Name == "" {
			continue
		}
		srv := fmt.Sprintf("_%s._%s.%s", p.Name, strings.ToLower(string(p.Protocol)), name)
		if r, _, err := e.cfg.DNS.Query(ctx, srv, dns.TypeSRV); err == nil {
			st.Evidence = append(st.Evidence, fmt.Sprintf("%s SRV -> %s %s", srv, dns.RcodeToString[r.Rcode], answers(r)))
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
				st.Status, st.Message = StatusWarning, st.Message+"; no SRV record for port "+p.Name
			}
		}
	}
	return st
}

// externalNameVerdict judges the answer for an ExternalName Service: the
// cluster DNS aliases it, and the alias must resolve.
func externalNameVerdict(st Step, svc *corev1.Service, r *dns.Msg) Step {
	target := svc.Spec.ExternalName
	if got := addrs(r); len(got) > 0 {
		st.Message = fmt.Sprintf("alias of %s -> %s", clean(target), strings.Join(got, ","))
		return st
	}
	st.Status = StatusBroken
	rcode := dns.RcodeToString[r.Rcode]
	if r.Rcode == dns.RcodeSuccess {
		rcode = "no address"
	}
	st.Message = fmt.Sprintf("externalName %s does not resolve (%s from the cluster DNS)", clean(target), rcode)
	return st
}

// wantedAddrs are the addresses the DNS should answer (nil: headless, any).
func wantedAddrs(svc *corev1.Service) []string {
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		return nil
	}
	if len(svc.Spec.ClusterIPs) == 0 {
		return []string{svc.Spec.ClusterIP}
	}
	return slices.Clone(svc.Spec.ClusterIPs)
}

func addrs(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		switch a := rr.(type) {
		case *dns.A:
			out = append(out, a.A.String())
		case *dns.AAAA:
			out = append(out, a.AAAA.String())
		}
	}
	slices.Sort(out)
	return out
}

func answers(r *dns.Msg) string {
	var out []string
	for _, rr := range r.Answer {
		f := strings.Fields(rr.String())
		if len(f) >= 5 {
			out = append(out, f[3]+" "+strings.Join(f[4:], " "))
		}
	}
	if len(out) == 0 {
		return "(no answer)"
	}
	return clean(strings.Join(out, ", "))
}

const dnsTypeA = dns.TypeA

func rcodeName(rcode int) string { return dns.RcodeToString[rcode] }

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
