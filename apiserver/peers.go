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
	"k8s.io/utils/ptr"
)

// Every API server announces itself with a Lease in kube-system; the
// kubernetes Service's endpoints are the addresses of the live ones. All
// servers compute the same set from the same leases, so several servers on
// one etcd agree instead of overwriting each other.
const (
	peerLeaseLabel    = "portal.dev/apiserver"
	peerAddressAnnot  = "portal.dev/advertise-address"
	peerPortAnnot     = "portal.dev/secure-port"
	peerLeaseDuration = 30 // seconds; renewed every reconcile (10 s)
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

func (b *bootstrapper) renewLease(ctx context.Context, client kubernetes.Interface) error {
	leases := client.CoordinationV1().Leases("kube-system")
	now := metav1.NewMicroTime(time.Now())
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
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// livePeers lists the API servers whose lease is fresh. The port is the one
// of the longest-running server; servers on other ports are left out (a
// Service has one target port).
func (b *bootstrapper) livePeers(ctx context.Context, client kubernetes.Interface) (peerSet, error) {
	list, err := client.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{LabelSelector: peerLeaseLabel})
	if err != nil {
		return peerSet{}, err
	}
	live := slices.DeleteFunc(list.Items, func(l coordinationv1.Lease) bool {
		return l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > peerLeaseDuration*time.Second
	})
	slices.SortFunc(live, func(a, c coordinationv1.Lease) int {
		if d := a.CreationTimestamp.Compare(c.CreationTimestamp.Time); d != 0 {
			return d
		}
		return strings.Compare(a.Name, c.Name)
	})
	set := peerSet{port: int32(b.o.SecurePort)}
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
	if len(set.addrs) == 0 {
		own, _ := netip.AddrFromSlice(b.o.AdvertiseAddress)
		set.addrs = []netip.Addr{own.Unmap()}
	}
	slices.SortFunc(set.addrs, netip.Addr.Compare)
	return set, nil
}
