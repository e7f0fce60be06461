package apiserver

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func peerLease(name, addr string, port int, renewed time.Time, duration *int32) coordinationv1.Lease {
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: map[string]string{peerLeaseLabel: "true"},
			Annotations:       map[string]string{peerAddressAnnot: addr, peerPortAnnot: strconv.Itoa(port)},
			CreationTimestamp: metav1.NewTime(renewed.Add(-time.Hour))},
		Spec: coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(renewed)), LeaseDurationSeconds: duration},
	}
}

func TestLeaseExpired(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name  string
		lease coordinationv1.Lease
		want  bool
	}{
		{"renewed 10 s ago, 15 s lease", peerLease("a", "10.0.0.1", 6443, now.Add(-10*time.Second), ptr.To(int32(15))), false},
		{"renewed 16 s ago, 15 s lease", peerLease("a", "10.0.0.1", 6443, now.Add(-16*time.Second), ptr.To(int32(15))), true},
		{"renewed 16 s ago, 30 s lease of an older server", peerLease("a", "10.0.0.1", 6443, now.Add(-16*time.Second), ptr.To(int32(30))), false},
		{"no duration: the default 15 s", peerLease("a", "10.0.0.1", 6443, now.Add(-16*time.Second), nil), true},
		{"never renewed", coordinationv1.Lease{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := leaseExpired(tc.lease, now); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPeersOf(t *testing.T) {
	now := time.Now()
	own := netip.MustParseAddr("10.0.0.1")
	tests := []struct {
		name     string
		live     []coordinationv1.Lease
		withSelf bool
		want     []string
	}{
		{"own lease not readable yet: listed anyway", []coordinationv1.Lease{peerLease("b", "10.0.0.2", 6443, now, nil)}, true, []string{"10.0.0.1", "10.0.0.2"}},
		{"leaving: only the others", []coordinationv1.Lease{peerLease("b", "10.0.0.2", 6443, now, nil)}, false, []string{"10.0.0.2"}},
		{"leaving last: nothing, so the endpoints stay", nil, false, nil},
		{"alone", nil, true, []string{"10.0.0.1"}},
		{"a server on another port left out", []coordinationv1.Lease{peerLease("b", "10.0.0.2", 6443, now, nil), peerLease("c", "10.0.0.3", 7443, now, nil)}, true, []string{"10.0.0.1", "10.0.0.2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set := peersOf(tc.live, 6443, own, tc.withSelf)
			var got []string
			for _, a := range set.addrs {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLeaveTakesTheServerOutAtOnce: a server shutting down cleanly deletes
// its lease and leaves the kubernetes endpoints without waiting for the
// lease to expire; the last server leaves them as they are.
func TestLeaveTakesTheServerOutAtOnce(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	mk := func(addr string) *bootstrapper {
		o := DefaultOptions()
		o.AdvertiseAddress, o.SecurePort = net.ParseIP(addr), 6443
		return &bootstrapper{o: o, cidrs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}}
	}
	a, b := mk("10.0.0.1"), mk("10.0.0.2")
	for _, s := range []*bootstrapper{a, b, a} {
		if err := s.reconcile(ctx, client); err != nil {
			t.Fatal(err)
		}
	}
	endpoints := func() []string {
		slice, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range slice.Endpoints {
			out = append(out, e.Addresses...)
		}
		return out
	}
	if got, want := endpoints(), []string{"10.0.0.1", "10.0.0.2"}; !slices.Equal(got, want) {
		t.Fatalf("before: got %v, want %v", got, want)
	}
	if err := a.leave(client); err != nil {
		t.Fatal(err)
	}
	if got, want := endpoints(), []string{"10.0.0.2"}; !slices.Equal(got, want) {
		t.Errorf("after a left: got %v, want %v", got, want)
	}
	eps, _ := client.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if got := eps.Subsets[0].Addresses; len(got) != 1 || got[0].IP != "10.0.0.2" {
		t.Errorf("Endpoints after a left: got %v, want 10.0.0.2 alone", got)
	}
	if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, a.leaseName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a's lease: got %v, want it deleted", err)
	}
	// A pass already running as a leaves does not put it back.
	if err := a.reconcile(ctx, client); err != nil {
		t.Fatal(err)
	}
	if got, want := endpoints(), []string{"10.0.0.2"}; !slices.Equal(got, want) {
		t.Errorf("a reconcile after leaving: got %v, want %v", got, want)
	}
	if err := b.leave(client); err != nil {
		t.Fatal(err)
	}
	if got, want := endpoints(), []string{"10.0.0.2"}; !slices.Equal(got, want) {
		t.Errorf("after the last server left: got %v, want %v (kept)", got, want)
	}
}

// TestFirstServerBackKeepsItsPeers pins the endpoint shrink after a full
// outage: every lease was old when the first server came back, and it
// rewrote the kubernetes endpoints to itself alone before the others could
// renew, sending every component's load balancer through a reconnect wave.
func TestFirstServerBackKeepsItsPeers(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	mk := func(addr string) *bootstrapper {
		o := DefaultOptions()
		o.AdvertiseAddress, o.SecurePort = net.ParseIP(addr), 6443
		return &bootstrapper{o: o, cidrs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}}
	}
	a, b := mk("10.0.0.1"), mk("10.0.0.2")
	clock := time.Now()
	a.now = func() time.Time { return clock }
	b.now = a.now
	for _, s := range []*bootstrapper{a, b} {
		if err := s.reconcile(ctx, client); err != nil {
			t.Fatal(err)
		}
	}
	endpoints := func() []string {
		slice, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range slice.Endpoints {
			out = append(out, e.Addresses...)
		}
		return out
	}
	// Every server is down for a minute; a comes back first, as a new
	// process that has seen nothing.
	clock = clock.Add(time.Minute)
	a = mk("10.0.0.1")
	a.now = func() time.Time { return clock }
	if err := a.reconcile(ctx, client); err != nil {
		t.Fatal(err)
	}
	if got, want := endpoints(), []string{"10.0.0.1", "10.0.0.2"}; !slices.Equal(got, want) {
		t.Errorf("right after a came back: got %v, want %v (b may still renew)", got, want)
	}
	// b never renews: after a watched its lease stand still for its
	// duration, b leaves the endpoints.
	clock = clock.Add((peerLeaseDuration + 1) * time.Second)
	if err := a.reconcile(ctx, client); err != nil {
		t.Fatal(err)
	}
	if got, want := endpoints(), []string{"10.0.0.1"}; !slices.Equal(got, want) {
		t.Errorf("after b stayed silent for its lease duration: got %v, want %v", got, want)
	}
}
