package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"portal.dev/portal/apiserver/admission/reservedleases"
)

// Every API server announces itself with a Lease in kube-system; the
// kubernetes Service's endpoints are the addresses of the live ones. All
// servers compute the same set from the same leases, so several servers on
// one etcd agree instead of overwriting each other. The figures are
// kube-apiserver's lease endpoint reconciler's: a lease lasts 15 s and is
// renewed every 10 s, so a server that stops renewing leaves the endpoints
// (and clients' load balancers drop it) within 15 s plus one reconcile.
const (
	peerLeaseLabel     = reservedleases.PeerLeaseLabel
	peerAddressAnnot   = "portal.dev/advertise-address"
	peerPortAnnot      = "portal.dev/secure-port"
	peerLeaseDuration  = 15 // seconds
	peerRenewInterval  = 10 * time.Second
	peerRemovalTimeout = 5 * time.Second
)

// peerSet is the endpoint set of the kubernetes Service.
type peerSet struct {
	port  int32
	addrs []netip.Addr
}

func (b *bootstrapper) leaseName() string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s:%d", b.o.AdvertiseAddress, b.o.SecurePort))
	return "portal-apiserver-" + hex.EncodeToString(sum[:6])
}

func (b *bootstrapper) ownAddr() netip.Addr {
	own, _ := netip.AddrFromSlice(b.o.AdvertiseAddress)
	return own.Unmap()
}

func (b *bootstrapper) renewLease(ctx context.Context, client kubernetes.Interface) error {
	leases := client.CoordinationV1().Leases("kube-system")
	now := metav1.NewMicroTime(b.clock())
	host, _ := os.Hostname()
	lease, err := leases.Get(ctx, b.leaseName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: b.leaseName(), Labels: map[string]string{peerLeaseLabel: "true"},
				Annotations: map[string]string{
					peerAddressAnnot: b.o.AdvertiseAddress.String(),
					peerPortAnnot:    strconv.Itoa(b.o.SecurePort),
				}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(host), LeaseDurationSeconds: ptr.To(int32(peerLeaseDuration)),
				AcquireTime: &now, RenewTime: &now},
		}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(peerLeaseDuration))
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// leaseExpired tells whether l was not renewed within its own duration
// (peerLeaseDuration for a lease that names none), so a server that
// announced a longer duration is judged by what it promised.
func leaseExpired(l coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil {
		return true
	}
	d := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, peerLeaseDuration)) * time.Second
	return now.Sub(l.Spec.RenewTime.Time) > d
}

func (b *bootstrapper) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

// peerSighting is a peer lease's renewTime and when this server first saw it.
type peerSighting struct {
	renew, at time.Time
}

// peerDeadLocked tells whether l expired and this server has watched its
// renewTime stand still for the lease's whole duration, as dns/publish and
// the node lifecycle controller judge their peers. After every API server
// was down, every lease is old; the first server back must not take the
// others out of the kubernetes Service (and send every component's load
// balancer through a reconnect wave) before they had a chance to renew.
func (b *bootstrapper) peerDeadLocked(l coordinationv1.Lease, now time.Time) bool {
	var renew time.Time
	if l.Spec.RenewTime != nil {
		renew = l.Spec.RenewTime.Time
	}
	s, ok := b.seen[l.Name]
	if !ok || !s.renew.Equal(renew) {
		if b.seen == nil {
			b.seen = map[string]peerSighting{}
		}
		s = peerSighting{renew: renew, at: now}
		b.seen[l.Name] = s
	}
	if !leaseExpired(l, now) {
		return false
	}
	d := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, peerLeaseDuration)) * time.Second
	return now.Sub(s.at) > d
}

// livePeersLocked lists the API servers whose lease is alive (see
// peerDeadLocked), this one always included unless withSelf is false (it
// is leaving). The port is the one of the longest-running server; servers
// on other ports are left out (a Service has one target port). The
// sightings of leases that are gone are forgotten.
func (b *bootstrapper) livePeersLocked(ctx context.Context, client kubernetes.Interface, withSelf bool) (peerSet, error) {
	list, err := client.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{LabelSelector: peerLeaseLabel})
	if err != nil {
		return peerSet{}, err
	}
	now := b.clock()
	listed := map[string]bool{}
	live := slices.DeleteFunc(list.Items, func(l coordinationv1.Lease) bool {
		listed[l.Name] = true
		if l.Name == b.leaseName() {
			return !withSelf
		}
		return b.peerDeadLocked(l, now)
	})
	for name := range b.seen {
		if !listed[name] {
			delete(b.seen, name)
		}
	}
	return peersOf(live, int32(b.o.SecurePort), b.ownAddr(), withSelf), nil
}

// peersOf is the endpoint set of the live leases. Like kube-apiserver's
// reconciler, a server always lists itself (its own lease may not be
// readable yet), and a server leaving with no other live server listed
// gets an empty set: the caller then leaves the endpoints alone rather
// than erase them.
func peersOf(live []coordinationv1.Lease, ownPort int32, own netip.Addr, withSelf bool) peerSet {
	slices.SortFunc(live, func(a, c coordinationv1.Lease) int {
		if d := a.CreationTimestamp.Compare(c.CreationTimestamp.Time); d != 0 {
			return d
		}
		return strings.Compare(a.Name, c.Name)
	})
	set := peerSet{port: ownPort}
	if len(live) > 0 {
		if p, err := strconv.Atoi(live[0].Annotations[peerPortAnnot]); err == nil {
			set.port = int32(p)
		}
	}
	for _, l := range live {
		addr, err := netip.ParseAddr(l.Annotations[peerAddressAnnot])
		if err != nil || l.Annotations[peerPortAnnot] != strconv.Itoa(int(set.port)) {
			continue
		}
		if !slices.Contains(set.addrs, addr.Unmap()) {
			set.addrs = append(set.addrs, addr.Unmap())
		}
	}
	if withSelf && set.port == ownPort && !slices.Contains(set.addrs, own) {
		set.addrs = append(set.addrs, own)
	}
	if withSelf && len(set.addrs) == 0 {
		set.addrs = []netip.Addr{own}
	}
	slices.SortFunc(set.addrs, netip.Addr.Compare)
	return set
}

// leave is the clean shutdown of kube-apiserver's lease reconciler: stop
// renewing, delete this server's lease and take its address out of the
// kubernetes Service's endpoints at once, so clients move to the other
// servers before this one stops serving. The last server leaves the
// endpoints as they are.
func (b *bootstrapper) leave(client kubernetes.Interface) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left = true
	ctx, cancel := context.WithTimeout(context.Background(), peerRemovalTimeout)
	defer cancel()
	err := client.CoordinationV1().Leases("kube-system").Delete(ctx, b.leaseName(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the API server lease: %w", err)
	}
	peers, err := b.livePeersLocked(ctx, client, false)
	if err != nil {
		return err
	}
	if len(peers.addrs) == 0 {
		return nil
	}
	if err := b.reconcileEndpoints(ctx, client, peers); err != nil {
		return err
	}
	if err := b.reconcileEndpointSlice(ctx, client, peers); err != nil {
		return err
	}
	klog.InfoS("Left the kubernetes Service's endpoints", "remaining", peers.addrs)
	return nil
}
