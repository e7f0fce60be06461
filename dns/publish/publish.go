// Package publish makes running DNS servers reachable as the cluster's
// kube-dns Service. Portal's DNS runs as a process on some nodes, not as
// pods a selector could find, so each server writes its own EndpointSlice
// for the Service and holds a Lease that says it is alive; any server
// removes the slices of servers whose Lease expired. It owns the kube-dns
// Service only when it created it (no selector): on a cluster where
// kube-dns selects pods (a real Kubernetes with CoreDNS), it publishes
// nothing.
package publish

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// ManagedBy marks the EndpointSlices DNS servers write.
const ManagedBy = "portal-dns"

// Options say what to publish.
type Options struct {
	// Namespace and Name of the Service (kube-system/kube-dns).
	Namespace, Name string
	// ServiceIP is the Service's ClusterIP, the pods' nameserver (the
	// agents' --cluster-dns).
	ServiceIP netip.Addr
	// Address and Port are where this server answers.
	Address netip.Addr
	Port    int
	// MetricsPort is where this server serves /metrics on Address (see
	// MetricsPort); 0 leaves the endpoint without a metrics port, so the
	// Service's metrics port has no endpoint instead of one that refuses.
	MetricsPort int
	// Identity names this server's slice and Lease (its node name).
	Identity string
	// NodeName is set on the endpoint, for traffic policies.
	NodeName string
	// LeaseDuration is how long a silent server stays published; renewed
	// every quarter of it.
	LeaseDuration time.Duration
	// Ready says whether the server answers yet.
	Ready func() bool
}

// Publisher keeps this server's endpoint of the Service.
type Publisher struct {
	client kubernetes.Interface
	o      Options
	// now is time.Now unless a test sets it.
	now func() time.Time
	// seen is when this server first saw each other server's current
	// renewTime. A server is judged dead by how long this one watched its
	// Lease stand still, as the node lifecycle controller judges nodes,
	// not by the renewTime alone: after the API was down, every Lease is
	// old, and removing the servers that could not renew meanwhile would
	// leave kube-dns without endpoints just as the API returns.
	seen map[string]sighting
}

// sighting is a renewTime and when it was first seen.
type sighting struct {
	renew, at time.Time
}

// New returns a Publisher; nothing happens before Run.
func New(client kubernetes.Interface, o Options) *Publisher {
	if o.Namespace == "" {
		o.Namespace = "kube-system"
	}
	if o.Name == "" {
		o.Name = "kube-dns"
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 40 * time.Second
	}
	if o.Ready == nil {
		o.Ready = func() bool { return true }
	}
	return &Publisher{client: client, o: o, now: time.Now}
}

func (p *Publisher) sliceName() string { return p.o.Name + "-" + p.o.Identity }

// Run publishes until ctx ends, then withdraws this server's endpoint so
// clients move to the others at once.
func (p *Publisher) Run(ctx context.Context) error {
	tick := time.NewTicker(p.o.LeaseDuration / 4)
	defer tick.Stop()
	fast := time.NewTicker(200 * time.Millisecond) // until ready
	defer fast.Stop()
	published := false
	for {
		// Ready is read once per round: the slice written and the switch
		// to the slow ticker must agree, or a server that turned ready
		// between the two would stay published as not ready for a whole
		// tick, and every pod's lookups would fail meanwhile.
		ready := p.o.Ready()
		if err := p.sync(ctx, ready); err != nil {
			if errors.Is(err, errForeignService) {
				klog.InfoS("Not publishing DNS: the Service selects pods, so another DNS serves it", "service", p.o.Namespace+"/"+p.o.Name)
				<-ctx.Done()
				return nil
			}
			if ctx.Err() == nil {
				klog.ErrorS(err, "Publishing DNS endpoint", "service", p.o.Namespace+"/"+p.o.Name)
			}
			// The others may have failed to renew for the same reason:
			// judge them afresh once the API answers.
			p.seen = nil
		} else if !published && ready {
			published = true
			fast.Stop()
			klog.InfoS("DNS endpoint published", "service", p.o.Namespace+"/"+p.o.Name, "address", p.o.Address, "port", p.o.Port)
		}
		select {
		case <-ctx.Done():
			p.withdraw()
			return nil
		case <-tick.C:
		case <-fast.C:
		}
	}
}

var errForeignService = errors.New("service has a selector")

// sync makes sure the Service exists, renews the Lease, writes this
// server's slice (its endpoint ready or not) and removes the slices of
// dead servers.
func (p *Publisher) sync(ctx context.Context, ready bool) error {
	if err := p.ensureService(ctx); err != nil {
		return err
	}
	if err := p.renewLease(ctx); err != nil {
		return err
	}
	if err := p.writeSlice(ctx, ready); err != nil {
		return err
	}
	return p.removeDead(ctx)
}

func (p *Publisher) ensureService(ctx context.Context) error {
	svcs := p.client.CoreV1().Services(p.o.Namespace)
	cur, err := svcs.Get(ctx, p.o.Name, metav1.GetOptions{})
	if err == nil {
		if len(cur.Spec.Selector) > 0 {
			return errForeignService
		}
		p.addMissingPorts(ctx, cur)
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: p.o.Name, Namespace: p.o.Namespace, Labels: map[string]string{
			"k8s-app": "kube-dns", "kubernetes.io/name": "Portal-DNS", "kubernetes.io/cluster-service": "true"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: p.o.ServiceIP.String(),
			Ports:     p.servicePorts(),
		},
	}
	if !p.o.ServiceIP.IsValid() {
		svc.Spec.ClusterIP = ""
	}
	_, err = svcs.Create(ctx, svc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create Service %s/%s: %w", p.o.Namespace, p.o.Name, err)
	}
	return nil
}

// servicePorts are the kube-dns Service's ports, those of CoreDNS's
// Service: DNS over UDP and TCP on 53, and Prometheus metrics on 9153.
// Without a selector the target ports are not used for routing (the
// EndpointSlices' ports are); they say where this server listens.
func (p *Publisher) servicePorts() []corev1.ServicePort {
	return []corev1.ServicePort{
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(int32(p.o.Port))},
		{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(int32(p.o.Port))},
		{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9153, TargetPort: intstr.FromInt32(9153)},
	}
}

// addMissingPorts gives a Service created by an earlier Portal the ports
// it lacks (the metrics port came later). A port whose name or number and
// protocol is taken is left out, and a Service with an unnamed port is
// left alone (a second port would make it invalid), so a hand-made Service
// is never made invalid. It is best effort: a failed update is logged, and
// publishing the endpoint, which is what DNS needs, goes on.
func (p *Publisher) addMissingPorts(ctx context.Context, cur *corev1.Service) {
	if slices.ContainsFunc(cur.Spec.Ports, func(have corev1.ServicePort) bool { return have.Name == "" }) {
		return
	}
	svc := cur.DeepCopy()
	for _, want := range p.servicePorts() {
		if !slices.ContainsFunc(svc.Spec.Ports, func(have corev1.ServicePort) bool {
			return have.Name == want.Name || (have.Port == want.Port && have.Protocol == want.Protocol)
		}) {
			svc.Spec.Ports = append(svc.Spec.Ports, want)
		}
	}
	if len(svc.Spec.Ports) == len(cur.Spec.Ports) {
		return
	}
	if _, err := p.client.CoreV1().Services(p.o.Namespace).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		klog.FromContext(ctx).Error(err, "Adding the missing ports to the DNS Service", "service", klog.KObj(cur))
	}
}

func (p *Publisher) renewLease(ctx context.Context) error {
	leases := p.client.CoordinationV1().Leases(p.o.Namespace)
	now := metav1.NewMicroTime(time.Now())
	cur, err := leases.Get(ctx, p.sliceName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: p.sliceName(), Namespace: p.o.Namespace,
				Labels: map[string]string{discoveryv1.LabelManagedBy: ManagedBy}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(p.o.Identity),
				LeaseDurationSeconds: ptr.To(int32(p.o.LeaseDuration / time.Second)), RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	cur.Spec.RenewTime = &now
	cur.Spec.HolderIdentity = ptr.To(p.o.Identity)
	_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

func (p *Publisher) slice(ready bool) *discoveryv1.EndpointSlice {
	at := discoveryv1.AddressTypeIPv4
	if p.o.Address.Is6() {
		at = discoveryv1.AddressTypeIPv6
	}
	ep := discoveryv1.Endpoint{Addresses: []string{p.o.Address.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false)}}
	if p.o.NodeName != "" {
		ep.NodeName = ptr.To(p.o.NodeName)
	}
	ports := []discoveryv1.EndpointPort{
		{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(p.o.Port))},
		{Name: ptr.To("dns-tcp"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(p.o.Port))},
	}
	if p.o.MetricsPort != 0 {
		ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To("metrics"), Protocol: ptr.To(corev1.ProtocolTCP),
			Port: ptr.To(int32(p.o.MetricsPort))})
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: p.sliceName(), Namespace: p.o.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: p.o.Name, discoveryv1.LabelManagedBy: ManagedBy}},
		AddressType: at,
		Endpoints:   []discoveryv1.Endpoint{ep},
		Ports:       ports,
	}
}

func (p *Publisher) writeSlice(ctx context.Context, ready bool) error {
	slices := p.client.DiscoveryV1().EndpointSlices(p.o.Namespace)
	want := p.slice(ready)
	cur, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if sameEndpoints(cur, want) {
		return nil
	}
	want.ResourceVersion = cur.ResourceVersion
	_, err = slices.Update(ctx, want, metav1.UpdateOptions{})
	return err
}

func sameEndpoints(a, b *discoveryv1.EndpointSlice) bool {
	if len(a.Endpoints) != 1 || a.AddressType != b.AddressType {
		return false
	}
	x, y := a.Endpoints[0], b.Endpoints[0]
	return fmt.Sprint(x.Addresses, ptr.Deref(x.Conditions.Ready, false), ptr.Deref(x.NodeName, ""), portList(a.Ports)) ==
		fmt.Sprint(y.Addresses, ptr.Deref(y.Conditions.Ready, false), ptr.Deref(y.NodeName, ""), portList(b.Ports))
}

func portList(ports []discoveryv1.EndpointPort) []string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = fmt.Sprintf("%s/%s/%d", ptr.Deref(p.Name, ""), ptr.Deref(p.Protocol, ""), ptr.Deref(p.Port, 0))
	}
	return out
}

// removeDead deletes the slices of servers whose Lease expired or vanished:
// a server killed with -9 cannot withdraw its own. It forgets the sightings
// of servers whose slice is gone, so identities that come and go (pods
// restarting under new names) do not pile up.
func (p *Publisher) removeDead(ctx context.Context) error {
	sel := discoveryv1.LabelManagedBy + "=" + ManagedBy
	list, err := p.client.DiscoveryV1().EndpointSlices(p.o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return err
	}
	alive := map[string]bool{}
	for _, s := range list.Items {
		if s.Name == p.sliceName() {
			continue
		}
		lease, err := p.client.CoordinationV1().Leases(p.o.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil && !p.dead(lease) {
			alive[s.Name] = true
			continue
		}
		klog.InfoS("Removing the endpoint of a DNS server that stopped renewing", "slice", s.Name)
		p.client.DiscoveryV1().EndpointSlices(p.o.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &s.ResourceVersion}})
		if err == nil {
			p.client.CoordinationV1().Leases(p.o.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{ResourceVersion: &lease.ResourceVersion}})
		}
	}
	for name := range p.seen {
		if !alive[name] {
			delete(p.seen, name)
		}
	}
	return nil
}

// dead tells whether l expired and this server has watched it stand still
// for its whole duration.
func (p *Publisher) dead(l *coordinationv1.Lease) bool {
	now := p.now()
	var renew time.Time
	if l.Spec.RenewTime != nil {
		renew = l.Spec.RenewTime.Time
	}
	s, ok := p.seen[l.Name]
	if !ok || !s.renew.Equal(renew) {
		if p.seen == nil {
			p.seen = map[string]sighting{}
		}
		s = sighting{renew: renew, at: now}
		p.seen[l.Name] = s
	}
	if !expired(l, now) {
		return false
	}
	d := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
	return now.Sub(s.at) > d
}

func expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// withdraw removes this server's slice and Lease on a clean stop.
func (p *Publisher) withdraw() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	p.client.DiscoveryV1().EndpointSlices(p.o.Namespace).Delete(ctx, p.sliceName(), metav1.DeleteOptions{})
	p.client.CoordinationV1().Leases(p.o.Namespace).Delete(ctx, p.sliceName(), metav1.DeleteOptions{})
}

// MetricsPort is the port of a /metrics served on bindAddress (the DNS's
// --metrics-bind-address) as seen from endpoint, the address published
// for the kube-dns Service: bound to every address or to endpoint itself.
// It is 0 otherwise, as for the default loopback address, which no client
// of the Service could reach.
func MetricsPort(bindAddress string, endpoint netip.Addr) int {
	host, port, err := net.SplitHostPort(bindAddress)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n > 65535 {
		return 0
	}
	if host == "" {
		return n
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return 0
	}
	if a.IsUnspecified() || a.Unmap() == endpoint.Unmap() {
		return n
	}
	return 0
}
