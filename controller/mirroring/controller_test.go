package mirroring

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// harness runs a Controller on real informers over a fake clientset,
// inside a synctest bubble whose fake clock lets settle wait for "every
// event handled, every sync finished" in no real time.
type harness struct {
	t      *testing.T
	client *fake.Clientset
	ctx    context.Context
}

func start(t *testing.T, objs ...runtime.Object) *harness {
	client := fake.NewClientset(objs...)
	generateNames(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		c.Run(ctx, 2)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done // Run returns only after its workers stopped
		factory.Shutdown()
	})
	h := &harness{t: t, client: client, ctx: ctx}
	h.settle()
	return h
}

// generateNames makes the fake clientset honour metadata.generateName, as
// the API server does.
func generateNames(client *fake.Clientset) {
	n := 0
	client.PrependReactor("create", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
		if s.Name == "" && s.GenerateName != "" {
			n++
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, n)
		}
		return false, nil, nil
	})
}

// settle lets the bubble's clock run until every timer due in the next
// few seconds has fired and every goroutine is blocked again.
func (h *harness) settle() {
	for range 5 {
		time.Sleep(time.Second)
		synctest.Wait()
	}
}

// slices returns the EndpointSlices of a service, sorted by name.
func (h *harness) slices(service string) []*discoveryv1.EndpointSlice {
	h.t.Helper()
	list, err := h.client.DiscoveryV1().EndpointSlices("ns").List(h.ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		h.t.Fatal(err)
	}
	out := make([]*discoveryv1.EndpointSlice, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AddressType < out[j].AddressType })
	return out
}

// writes counts the EndpointSlice writes made so far.
func (h *harness) writes() int {
	n := 0
	for _, a := range h.client.Actions() {
		switch a.GetVerb() {
		case "create", "update", "delete", "patch":
			if a.GetResource().Resource == "endpointslices" {
				n++
			}
		}
	}
	return n
}

func (h *harness) updateEndpoints(name string, change func(*corev1.Endpoints)) {
	h.t.Helper()
	ep, err := h.client.CoreV1().Endpoints("ns").Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	change(ep)
	if _, err := h.client.CoreV1().Endpoints("ns").Update(h.ctx, ep, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
}

func TestControllerMirrorsSelectorlessService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, selectorless("ext"),
			endpointsObj("ext", subset([]string{"192.0.2.1"}, []string{"192.0.2.2"}, tcp("https", 443))))
		got := h.slices("ext")
		want := "IPv4 [https:443/TCP] 192.0.2.1(ready) 192.0.2.2(notready)"
		if s := render(got); s != want {
			t.Fatalf("got  %s\nwant %s", s, want)
		}
		s := got[0]
		if s.Labels[discoveryv1.LabelManagedBy] != ControllerName {
			t.Errorf("got managed-by %q, want %q", s.Labels[discoveryv1.LabelManagedBy], ControllerName)
		}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Endpoints" || !ptr.Deref(s.OwnerReferences[0].Controller, false) {
			t.Errorf("got ownerReferences %+v, want the Endpoints as controller", s.OwnerReferences)
		}

		h.updateEndpoints("ext", func(ep *corev1.Endpoints) {
			ep.Subsets = []corev1.EndpointSubset{subset([]string{"192.0.2.3"}, nil, tcp("https", 8443))}
		})
		want = "IPv4 [https:8443/TCP] 192.0.2.3(ready)"
		if s := render(h.slices("ext")); s != want {
			t.Errorf("after the Endpoints changed: got %s, want %s", s, want)
		}
	})
}

func TestControllerIPv6GetsAnIPv6Slice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, selectorless("ext"),
			endpointsObj("ext", subset([]string{"192.0.2.1", "2001:db8::1"}, nil, tcp("https", 443))))
		want := "IPv4 [https:443/TCP] 192.0.2.1(ready) | IPv6 [https:443/TCP] 2001:db8::1(ready)"
		if s := render(h.slices("ext")); s != want {
			t.Errorf("got  %s\nwant %s", s, want)
		}
	})
}

func TestControllerHonoursSkipMirror(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		skipped := endpointsObj("skipped", subset([]string{"192.0.2.1"}, nil, tcp("https", 443)))
		skipped.Labels[discoveryv1.LabelSkipMirror] = "true"
		h := start(t, selectorless("skipped"), skipped,
			selectorless("ext"), endpointsObj("ext", subset([]string{"192.0.2.2"}, nil, tcp("https", 443))))
		if got := h.slices("skipped"); len(got) != 0 {
			t.Errorf("got %s for a skip-mirror Endpoints, want no slices", render(got))
		}
		if got := h.slices("ext"); len(got) != 1 {
			t.Fatalf("got %d slices for ext, want 1", len(got))
		}
		h.updateEndpoints("ext", func(ep *corev1.Endpoints) { ep.Labels[discoveryv1.LabelSkipMirror] = "true" })
		if got := h.slices("ext"); len(got) != 0 {
			t.Errorf("after skip-mirror was set: got %s, want no slices", render(got))
		}
	})
}

func TestControllerIgnoresServicesWithSelector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := selectorless("web")
		svc.Spec.Selector = map[string]string{"app": "web"}
		h := start(t, svc, endpointsObj("web", subset([]string{"10.0.0.1"}, nil, tcp("http", 80))))
		if got := h.slices("web"); len(got) != 0 {
			t.Errorf("got %s, want no mirrored slices for a Service with a selector", render(got))
		}
	})
}

func TestControllerDeletesSlicesWithTheirSource(t *testing.T) {
	tests := []struct {
		name   string
		remove func(h *harness) error
	}{
		{"Endpoints deleted", func(h *harness) error {
			return h.client.CoreV1().Endpoints("ns").Delete(h.ctx, "ext", metav1.DeleteOptions{})
		}},
		{"Service deleted", func(h *harness) error {
			return h.client.CoreV1().Services("ns").Delete(h.ctx, "ext", metav1.DeleteOptions{})
		}},
		{"Service given a selector", func(h *harness) error {
			svc, _ := h.client.CoreV1().Services("ns").Get(h.ctx, "ext", metav1.GetOptions{})
			svc.Spec.Selector = map[string]string{"app": "ext"}
			_, err := h.client.CoreV1().Services("ns").Update(h.ctx, svc, metav1.UpdateOptions{})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := start(t, selectorless("ext"),
					endpointsObj("ext", subset([]string{"192.0.2.1", "2001:db8::1"}, nil, tcp("https", 443))))
				if got := h.slices("ext"); len(got) != 2 {
					t.Fatalf("got %d slices, want 2", len(got))
				}
				if err := tc.remove(h); err != nil {
					t.Fatal(err)
				}
				h.settle()
				if got := h.slices("ext"); len(got) != 0 {
					t.Errorf("got %s, want no slices", render(got))
				}
			})
		})
	}
}

func TestControllerLeavesUserSlicesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		user := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ext-by-hand", Labels: map[string]string{
				discoveryv1.LabelServiceName: "ext", discoveryv1.LabelManagedBy: "someone-else"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"198.51.100.1"}}},
		}
		h := start(t, selectorless("ext"), user,
			endpointsObj("ext", subset([]string{"192.0.2.1"}, nil, tcp("https", 443))))
		if got := len(h.slices("ext")); got != 2 {
			t.Fatalf("got %d slices, want the user's and the mirrored one", got)
		}
		if err := h.client.CoreV1().Endpoints("ns").Delete(h.ctx, "ext", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		h.settle()
		got := h.slices("ext")
		if len(got) != 1 || got[0].Name != "ext-by-hand" {
			t.Fatalf("got %s, want only the user's slice", render(got))
		}
		for _, a := range h.client.Actions() {
			if n, ok := a.(interface{ GetName() string }); ok && n.GetName() == "ext-by-hand" {
				t.Errorf("got %s of the user's slice, want it untouched", a.GetVerb())
			}
			if u, ok := a.(k8stesting.UpdateAction); ok && u.GetObject().(metav1.Object).GetName() == "ext-by-hand" {
				t.Errorf("got an update of the user's slice, want it untouched")
			}
		}
	})
}

func TestControllerNoWriteWhenNothingChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, selectorless("ext"),
			endpointsObj("ext", subset([]string{"192.0.2.1", "2001:db8::1"}, []string{"192.0.2.2"}, tcp("https", 443))))
		before := h.writes()
		if before != 2 {
			t.Fatalf("got %d writes to converge, want 2 creates", before)
		}
		// Changes that resync the Endpoints but change nothing mirrored:
		// the trigger-time annotation is not copied, and the Service's
		// ports are not part of the slices.
		h.updateEndpoints("ext", func(ep *corev1.Endpoints) {
			ep.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z"}
		})
		svc, _ := h.client.CoreV1().Services("ns").Get(h.ctx, "ext", metav1.GetOptions{})
		svc.Spec.Ports[0].Port = 8443
		_, _ = h.client.CoreV1().Services("ns").Update(h.ctx, svc, metav1.UpdateOptions{})
		h.settle()
		if got := h.writes(); got != before {
			t.Errorf("got %d EndpointSlice writes after no-op changes, want %d", got, before)
		}
	})
}
