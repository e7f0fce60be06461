package dns

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"portal.dev/portal/dns/index"
)

func TestInformerDrivenAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
				Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
					Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hl"},
				Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
			&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hl-1",
				Labels: map[string]string{discoveryv1.LabelServiceName: "hl"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Hostname: ptr.To("pet")}}},
		)
		s, err := New(client, Options{Upstream: []string{"none"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.setupForwarder(); err != nil {
			t.Fatal(err)
		}
		ask := func(name string, qtype uint16) int {
			t.Helper()
			req := new(dns.Msg)
			req.SetQuestion(name, qtype)
			out, ok := s.local(req)
			if !ok {
				t.Fatalf("%s: forwarded, want answered", name)
			}
			return out.resp.Rcode
		}
		steps := []struct {
			name  string
			do    func()
			qname string
			qtype uint16
			want  int
		}{
			{name: "SERVFAIL before the informers sync", qname: "web.default.svc.cluster.local.", qtype: dns.TypeA, want: dns.RcodeServerFailure},
			{name: "SERVFAIL, not NXDOMAIN, for a missing name before sync", qname: "nope.default.svc.cluster.local.", qtype: dns.TypeA, want: dns.RcodeServerFailure},
			{name: "SERVFAIL for reverse names before sync", qname: "10.0.96.10.in-addr.arpa.", qtype: dns.TypePTR, want: dns.RcodeServerFailure},
			{name: "synced: the service answers", do: func() {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(func() { cancel(); s.factory.Shutdown() })
				s.factory.Start(ctx.Done())
				go s.waitSynced(ctx)
				// WaitForCacheSync polls every 100ms: let the bubble's
				// clock run past one poll (no real time passes).
				time.Sleep(time.Second)
				synctest.Wait()
				if !s.Ready() {
					t.Fatal("Ready: got false after sync, want true")
				}
			}, qname: "web.default.svc.cluster.local.", qtype: dns.TypeA, want: dns.RcodeSuccess},
			{name: "synced: the headless endpoint answers", qname: "pet.hl.default.svc.cluster.local.", qtype: dns.TypeA, want: dns.RcodeSuccess},
			{name: "a new service answers after its add event", do: func() {
				_, err := client.CoreV1().Services("default").Create(context.Background(), &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "new"},
					Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.11", ClusterIPs: []string{"10.96.0.11"}}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
			}, qname: "new.default.svc.cluster.local.", qtype: dns.TypeA, want: dns.RcodeSuccess},
			{name: "a deleted service is gone with its delete event", do: func() {
				if err := client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
			}, qname: "web.default.svc.cluster.local.", qtype: dns.TypeA, want: dns.RcodeNameError},
			{name: "a deleted endpoint slice takes its names", do: func() {
				if err := client.DiscoveryV1().EndpointSlices("default").Delete(context.Background(), "hl-1", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
			}, qname: "pet.hl.default.svc.cluster.local.", qtype: dns.TypeA, want: dns.RcodeNameError},
			{name: "a new namespace exists", do: func() {
				_, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
			}, qname: "10-0-0-1.team.pod.cluster.local.", qtype: dns.TypeA, want: dns.RcodeSuccess},
		}
		for _, st := range steps {
			if st.do != nil {
				st.do()
			}
			if got := ask(st.qname, st.qtype); got != st.want {
				t.Errorf("%s: got %s, want %s", st.name, dns.RcodeToString[got], dns.RcodeToString[st.want])
			}
		}
	})
}

func TestToIndex(t *testing.T) {
	svcs := []struct {
		name string
		in   *corev1.Service
		want index.Kind
		ips  int
	}{
		{"clusterIP", &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", ClusterIPs: []string{"10.0.0.1", "fd00::1"}}}, index.ClusterIP, 2},
		{"clusterIP without clusterIPs", &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1"}}, index.ClusterIP, 1},
		{"headless", &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "None"}}, index.Headless, 0},
		{"ExternalName", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "x.example"}}, index.ExternalName, 0},
	}
	for _, tc := range svcs {
		t.Run(tc.name, func(t *testing.T) {
			slim, _ := slimService(tc.in)
			got := slim.(*record).value.(*index.Service)
			if got.Kind != tc.want || len(got.ClusterIPs) != tc.ips {
				t.Errorf("got kind %d with %d IPs, want %d with %d", got.Kind, len(got.ClusterIPs), tc.want, tc.ips)
			}
		})
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "s", Labels: map[string]string{discoveryv1.LabelServiceName: "svc", "other": "x"}, Annotations: map[string]string{"a": "b"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}, {Name: ptr.To("all")}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}},
			{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}},
			{Addresses: []string{"bogus"}},
		},
	}
	slim, _ := slimEndpointSlice(sl)
	r := slim.(*record)
	if r.namespace != "ns" || r.name != "s" {
		t.Errorf("record: got %s/%s, want ns/s", r.namespace, r.name)
	}
	got := r.value.(*index.EndpointSlice)
	if got.Service != "svc" || len(got.Ports) != 1 || got.Ports[0].Protocol != "TCP" {
		t.Errorf("slice: got service %q ports %v, want svc and one TCP port", got.Service, got.Ports)
	}
	if len(got.Endpoints) != 2 || !got.Endpoints[0].Ready || got.Endpoints[1].Ready {
		t.Errorf("endpoints: got %+v, want unset ready as ready, terminating as not ready, bogus dropped", got.Endpoints)
	}
	fqdn := toEndpointSlice(&discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"x.example"}}}})
	if len(fqdn.Endpoints) != 0 {
		t.Errorf("FQDN slice: got %d endpoints, want 0", len(fqdn.Endpoints))
	}
}
