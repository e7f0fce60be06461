package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/allocator"
	"portal.dev/portal/apiserver/svcconfig"
)

func testService(name string, typ corev1.ServiceType, edit func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: typ, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
				{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP},
			}},
	}
	if edit != nil {
		edit(s)
	}
	return s
}

func withClusterIP(ip string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = ip, []string{ip} }
}

// TestAllocationErrors: what the allocator refuses reaches the client as
// upstream's 422, on the field that asked and with upstream's message.
func TestAllocationErrors(t *testing.T) {
	cfg := svcconfig.ServiceConfig{ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/30")}}
	a := allocator.New(cfg, allocator.NewMemoryStore())
	rcfg := Config{Service: cfg, Allocator: a}
	ctx := context.Background()
	// Holds 10.0.0.1, node port 30005 and health check node port 30006.
	holder := testService("holder", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
		withClusterIP("10.0.0.1")(s)
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.Ports[0].NodePort, s.Spec.HealthCheckNodePort = 30005, 30006
	})
	if _, err := allocate(ctx, rcfg, nil, holder, nil, false); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		svc  *corev1.Service
		want string
	}{{
		name: "cluster IP out of range",
		svc:  testService("far", corev1.ServiceTypeClusterIP, withClusterIP("10.1.0.5")),
		want: `Service "far" is invalid: spec.clusterIPs: Invalid value: ["10.1.0.5"]: failed to allocate IP 10.1.0.5: ` +
			`the provided IP (10.1.0.5) is not in the valid range. The range of valid IPs is 10.0.0.0/30`,
	}, {
		name: "network address",
		svc:  testService("network", corev1.ServiceTypeClusterIP, withClusterIP("10.0.0.0")),
		want: `Service "network" is invalid: spec.clusterIPs: Invalid value: ["10.0.0.0"]: failed to allocate IP 10.0.0.0: ` +
			`the provided IP (10.0.0.0) is not in the valid range. The range of valid IPs is 10.0.0.0/30`,
	}, {
		name: "broadcast address",
		svc:  testService("broadcast", corev1.ServiceTypeClusterIP, withClusterIP("10.0.0.3")),
		want: `Service "broadcast" is invalid: spec.clusterIPs: Invalid value: ["10.0.0.3"]: failed to allocate IP 10.0.0.3: ` +
			`the provided IP (10.0.0.3) is not in the valid range. The range of valid IPs is 10.0.0.0/30`,
	}, {
		name: "cluster IP taken",
		svc:  testService("same-ip", corev1.ServiceTypeClusterIP, withClusterIP("10.0.0.1")),
		want: `Service "same-ip" is invalid: spec.clusterIPs: Invalid value: ["10.0.0.1"]: failed to allocate IP 10.0.0.1: provided IP is already allocated`,
	}, {
		name: "node port out of range",
		svc:  testService("low-port", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports[1].NodePort = 80 }),
		want: `Service "low-port" is invalid: spec.ports[1].nodePort: Invalid value: 80: ` +
			`provided port is not in the valid range. The range of valid ports is 30000-32767`,
	}, {
		name: "node port taken",
		svc:  testService("same-port", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports[1].NodePort = 30005 }),
		want: `Service "same-port" is invalid: spec.ports[1].nodePort: Invalid value: 30005: provided port is already allocated`,
	}, {
		name: "health check node port taken",
		svc: testService("same-hc", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 30006
		}),
		want: `Service "same-hc" is invalid: spec.healthCheckNodePort: Invalid value: 30006: ` +
			`failed to allocate requested HealthCheck NodePort 30006: provided port is already allocated`,
	}, {
		name: "family without a range",
		svc:  testService("v6", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }),
		want: `Service "v6" is invalid: spec.clusterIPs: Invalid value: "": failed to allocate: no IPv6 service range configured`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := allocate(ctx, rcfg, nil, tc.svc, nil, false)
			if err == nil || err.Error() != tc.want {
				t.Errorf("got %v, want %s", err, tc.want)
			}
		})
	}
	t.Run("range full", func(t *testing.T) {
		// 10.0.0.0/30 has two usable addresses; holder has one.
		if _, err := allocate(ctx, rcfg, nil, testService("second", corev1.ServiceTypeClusterIP, nil), nil, false); err != nil {
			t.Fatal(err)
		}
		_, err := allocate(ctx, rcfg, nil, testService("third", corev1.ServiceTypeClusterIP, nil), nil, false)
		want := `Service "third" is invalid: spec.clusterIPs: Invalid value: "": failed to allocate: range is full`
		if err == nil || err.Error() != want {
			t.Errorf("got %v, want %s", err, want)
		}
	})
}

// withPorts gives a Service n ports.
func withPorts(n int) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Ports = nil
		for p := int32(1000); len(s.Spec.Ports) < n; p++ {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint(p), Port: p, Protocol: corev1.ProtocolTCP})
		}
	}
}

// TestNodePortRangeFull pins issue 23: a NodePort Service with more ports
// than the node-port range has left was told "spec.clusterIPs: range is
// full", naming the cluster IP range, which had room.
func TestNodePortRangeFull(t *testing.T) {
	cfg := svcconfig.ServiceConfig{
		ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")},
		NodePortRange:   svcconfig.PortRange{Base: 30000, Size: 4},
	}
	rcfg := Config{Service: cfg, Allocator: allocator.New(cfg, allocator.NewMemoryStore())}
	ctx := context.Background()
	tests := []struct {
		name string
		svc  *corev1.Service
		want string
	}{{
		name: "node port of the second entry",
		svc:  testService("many", corev1.ServiceTypeNodePort, withPorts(3)),
		want: `Service "many" is invalid: spec.ports[1].nodePort: Invalid value: 0: failed to allocate a nodePort: range is full`,
	}, {
		name: "health check node port",
		svc: testService("local", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.Ports = s.Spec.Ports[:1]
		}),
		want: `Service "local" is invalid: spec.healthCheckNodePort: Invalid value: 0: failed to allocate a HealthCheck NodePort: range is full`,
	}}
	// Three of the four node ports are taken first; each case then has
	// one for its first entry and none for the next.
	if _, err := allocate(ctx, rcfg, nil, testService("holder", corev1.ServiceTypeNodePort, withPorts(3)), nil, false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := allocate(ctx, rcfg, nil, tc.svc, nil, false)
			if err == nil || err.Error() != tc.want {
				t.Errorf("got %v, want %s", err, tc.want)
			}
			if !apierrors.IsInvalid(err) {
				t.Errorf("got %v, want a 422 Invalid", err)
			}
		})
	}
}

// failingStore is a Store whose reservations fail with err, as etcd's do on
// a server cut from quorum.
type failingStore struct {
	*allocator.MemoryStore
	err error
}

func (s failingStore) Reserve(ctx context.Context, keys []allocator.Key, owner string) ([]allocator.Key, error) {
	return nil, fmt.Errorf("reserve %v: %w", keys, s.err)
}

// TestAllocationStorageFailure: a server cut from etcd quorum answered a
// Service create with 422 "spec: Internal error: reserve ...: etcdserver:
// request timed out", blaming a Service that is fine. A storage failure is
// a 5xx the client retries.
func TestAllocationStorageFailure(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want int32
	}{
		{name: "etcd request timed out", err: rpctypes.ErrTimeout, want: http.StatusGatewayTimeout},
		{name: "deadline exceeded", err: context.DeadlineExceeded, want: http.StatusGatewayTimeout},
		{name: "etcd has no leader", err: rpctypes.ErrNoLeader, want: http.StatusServiceUnavailable},
		{name: "something else", err: errors.New("disk on fire"), want: http.StatusInternalServerError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := svcconfig.ServiceConfig{ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}
			a := allocator.New(cfg, failingStore{MemoryStore: allocator.NewMemoryStore(), err: tc.err})
			_, err := allocate(context.Background(), Config{Service: cfg, Allocator: a}, nil,
				testService("web", corev1.ServiceTypeClusterIP, nil), nil, false)
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("got %v, want an API status", err)
			}
			if got := status.Status().Code; got != tc.want {
				t.Errorf("got %d (%v), want %d", got, err, tc.want)
			}
		})
	}
}

// fakeWrites answers a failed write's FinishFunc as a case says.
type fakeWrites struct {
	stored  func(context.Context, string, string) (*corev1.Service, error)
	unknown bool
}

func (f fakeWrites) get(ctx context.Context, ns, name string) (*corev1.Service, error) {
	return f.stored(ctx, ns, name)
}

func (f fakeWrites) unknownOutcome(*corev1.Service) bool { return f.unknown }

func (f fakeWrites) releaseWhenStored(*corev1.Service, []allocator.Key) {}

// TestFailedWriteThatLanded: etcd may apply a write it answered with an
// error (a leader lost mid-request). A Service create reported failed gave
// its node port back although the Service was stored, and the next Service
// got the same port. After a write known not to have happened, what the
// stored Service holds now stays reserved; when the stored Service cannot
// be read, nothing is given back.
func TestFailedWriteThatLanded(t *testing.T) {
	withPort := func(name string, port int32) *corev1.Service {
		return testService(name, corev1.ServiceTypeNodePort, func(s *corev1.Service) {
			s.Spec.Ports = s.Spec.Ports[:1]
			s.Spec.Ports[0].NodePort = port
		})
	}
	cases := []struct {
		name     string
		stored   func(context.Context, string, string) (*corev1.Service, error)
		unknown  bool
		wantKept bool
	}{
		{"the write landed", func(context.Context, string, string) (*corev1.Service, error) {
			return withPort("web", 30001), nil
		}, false, true},
		{"the stored Service cannot be read", func(context.Context, string, string) (*corev1.Service, error) {
			return nil, errors.New("etcdserver: request timed out")
		}, false, true},
		{"the write did not land", func(context.Context, string, string) (*corev1.Service, error) {
			return nil, nil
		}, false, false},
		{"etcd left the outcome unknown and has not applied it yet", func(context.Context, string, string) (*corev1.Service, error) {
			return nil, nil
		}, true, true},
		{"an older Service of that name holds another port", func(context.Context, string, string) (*corev1.Service, error) {
			return withPort("web", 30002), nil
		}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := svcconfig.ServiceConfig{
				ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")},
				NodePortRange:   svcconfig.PortRange{Base: 30000, Size: 10},
			}
			rcfg := Config{Service: cfg, Allocator: allocator.New(cfg, allocator.NewMemoryStore())}
			finish, err := allocate(context.Background(), rcfg, fakeWrites{stored: tc.stored, unknown: tc.unknown}, withPort("web", 30001), nil, false)
			if err != nil {
				t.Fatal(err)
			}
			finish(context.Background(), false)
			_, err = allocate(context.Background(), rcfg, nil, withPort("other", 30001), nil, false)
			if kept := err != nil; kept != tc.wantKept {
				t.Errorf("node port 30001 still reserved after the failed write: %v (second create: %v), want %v", kept, err, tc.wantKept)
			}
		})
	}
}
