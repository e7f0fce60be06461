package route

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// watcherEnv is a Watcher over a fake clientset, synced and running.
type watcherEnv struct {
	t       *testing.T
	ctx     context.Context
	client  *fake.Clientset
	w       *Watcher
	rec     *record.FakeRecorder
	changed <-chan struct{}
}

func startWatcher(t *testing.T, o WatcherOptions, objs ...runtime.Object) *watcherEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(100)
	o.Recorder = rec
	w := NewWatcher(client, factory, o)
	e := &watcherEnv{t: t, ctx: ctx, client: client, w: w, rec: rec, changed: w.Changed()}
	factory.Start(ctx.Done())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
	})
	e.waitFor("the first table", w.HasSynced)
	return e
}

// waitFor waits for cond, checking it after each change the Watcher
// signals, for at most a generous deadline (no fixed sleeps).
func (e *watcherEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-e.changed:
		case <-deadline.C:
			e.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// routes reports where a request for host and path goes now.
func (e *watcherEnv) routes(host, path string) string {
	return routed(e.w.Table().Route(host, path, false))
}

// events drains the recorded events.
func (e *watcherEnv) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func portalClass(isDefault bool) *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "portal"},
		Spec:       networkingv1.IngressClassSpec{Controller: ControllerName},
	}
	if isDefault {
		c.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
	}
	return c
}

func service(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Ports: ports}}
}

// classed makes an Ingress for host name "<name>.com" to Service web,
// with class set by spec (className), annotation (legacy) or neither.
func classed(ns, name, className, legacy string) *networkingv1.Ingress {
	ing := ingress(ns, name, 0, rule(name+".com", hpath("/", prefix, "web")))
	if className != "" {
		ing.Spec.IngressClassName = &className
	}
	if legacy != "" {
		ing.Annotations = map[string]string{LegacyClassAnnotation: legacy}
	}
	return ing
}

func TestWatcherClassSelection(t *testing.T) {
	other := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec: networkingv1.IngressClassSpec{Controller: "example.com/other"}}
	e := startWatcher(t, WatcherOptions{},
		portalClass(true), other, service("ns", "web", svcPort("", 80)),
		classed("ns", "byname", "portal", ""),
		classed("ns", "othername", "other", ""),
		classed("ns", "legacy", "", "portal"),
		classed("ns", "legacyother", "", "nginx"),
		classed("ns", "noclass", "", ""),
		classed("ns", "missingclass", "gone", ""),
	)
	for host, want := range map[string]string{
		"byname.com":       "web(byname.com /)",
		"othername.com":    "404",
		"legacy.com":       "web(legacy.com /)",
		"legacyother.com":  "404",
		"noclass.com":      "web(noclass.com /)",
		"missingclass.com": "404",
	} {
		if got := e.routes(host, "/"); got != want {
			t.Errorf("%s: got %s, want %s", host, got, want)
		}
	}
	// Without the default mark, an Ingress without a class is not ours.
	if _, err := e.client.NetworkingV1().IngressClasses().Update(e.ctx, portalClass(false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("noclass.com to leave", func() bool { return e.routes("noclass.com", "/") == "404" })
	// A served Ingress moved to another class leaves the Table.
	if _, err := e.client.NetworkingV1().Ingresses("ns").Update(e.ctx, classed("ns", "byname", "other", ""), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("byname.com to leave", func() bool { return e.routes("byname.com", "/") == "404" })
}

// An IngressClass named like ours but of another controller is not ours.
func TestWatcherClassOfAnotherController(t *testing.T) {
	c := portalClass(true)
	c.Spec.Controller = "k8s.io/ingress-nginx"
	e := startWatcher(t, WatcherOptions{}, c, service("ns", "web", svcPort("", 80)),
		classed("ns", "byname", "portal", ""), classed("ns", "noclass", "", ""))
	for _, host := range []string{"byname.com", "noclass.com"} {
		if got := e.routes(host, "/"); got != "404" {
			t.Errorf("%s: got %s, want 404", host, got)
		}
	}
}

func TestWatcherWatchNamespace(t *testing.T) {
	e := startWatcher(t, WatcherOptions{WatchNamespace: "mine"}, portalClass(true),
		service("mine", "web", svcPort("", 80)), service("theirs", "web", svcPort("", 80)),
		classed("mine", "a", "portal", ""), classed("theirs", "b", "portal", ""))
	if got := e.routes("a.com", "/"); got != "web(a.com /)" {
		t.Errorf("watched namespace: got %s, want web(a.com /)", got)
	}
	if got := e.routes("b.com", "/"); got != "404" {
		t.Errorf("other namespace: got %s, want 404", got)
	}
}

// EndpointSlice changes reach the Backend without a new Table.
func TestWatcherEndpointsWithoutRebuild(t *testing.T) {
	s := slice("ns", "web", "web-1", discoveryv1.AddressTypeIPv4, "", 8080, ep("10.0.0.1", nil, nil, nil))
	e := startWatcher(t, WatcherOptions{}, portalClass(true), service("ns", "web", svcPort("", 80)),
		classed("ns", "a", "portal", ""), s)
	tab := e.w.Table()
	ready := func() []string { return tab.Route("a.com", "/", false).Backend.Endpoints().Ready }
	if got := ready(); !slices.Equal(got, []string{"10.0.0.1:8080"}) {
		t.Fatalf("endpoints: got %v, want [10.0.0.1:8080]", got)
	}
	s = s.DeepCopy()
	s.Endpoints = append(s.Endpoints, ep("10.0.0.2", nil, nil, nil))
	if _, err := e.client.DiscoveryV1().EndpointSlices("ns").Update(e.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the new endpoint", func() bool { return len(ready()) == 2 })
	if e.w.Table() != tab {
		t.Errorf("an endpoint change built a new Table")
	}
	if err := e.client.DiscoveryV1().EndpointSlices("ns").Delete(e.ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("no endpoints", func() bool { return len(ready()) == 0 })
}

// A Secret update is served by the next Table; a broken Secret is an
// Event naming it, and the default certificate is served meanwhile.
func TestWatcherSecretUpdate(t *testing.T) {
	crt1, key1 := selfSigned(t, "v1")
	crt2, key2 := selfSigned(t, "v2")
	defCrt, defKey := selfSigned(t, "default")
	ing := classed("ns", "a", "portal", "")
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"a.com"}, SecretName: "tls"}}
	e := startWatcher(t, WatcherOptions{DefaultSSLCertificate: "kube-system/default-cert"},
		portalClass(true), service("ns", "web", svcPort("", 80)), ing,
		tlsSecret("ns", "tls", "", crt1, key1), tlsSecret("kube-system", "default-cert", "", defCrt, defKey))
	cert := func() string { return subject(e.w.Table().Certificate("a.com")) }
	if got := cert(); got != "v1" {
		t.Fatalf("certificate for a.com: %q, want v1", got)
	}
	e.waitFor("the default certificate", func() bool { return subject(e.w.DefaultCertificate()) == "default" })

	update := func(crt, key []byte) {
		t.Helper()
		if _, err := e.client.CoreV1().Secrets("ns").Update(e.ctx, tlsSecret("ns", "tls", "", crt, key), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(crt2, key2)
	e.waitFor("the new certificate", func() bool { return cert() == "v2" })
	update(crt1, key2) // mismatched
	e.waitFor("the broken certificate to go", func() bool { return cert() == "" })
	evs := e.events()
	want := "Warning TLSSecretInvalid TLS secret ns/tls: bad certificate or key: tls: private key does not match public key; serving a.com with the default certificate"
	if !slices.Contains(evs, want) {
		t.Errorf("events: got %q, want one %q", evs, want)
	}
	for _, ev := range evs {
		if strings.Contains(ev, "PRIVATE KEY") {
			t.Errorf("event quotes the key: %s", ev)
		}
	}
}

// A conflict is one Event on the newer Ingress, not one per rebuild.
func TestWatcherEventsNotRepeated(t *testing.T) {
	older := classed("ns", "older", "portal", "")
	newer := classed("ns", "newer", "portal", "")
	newer.CreationTimestamp = metav1.NewTime(epoch.Add(time.Hour))
	newer.Spec.Rules = older.Spec.Rules
	e := startWatcher(t, WatcherOptions{}, portalClass(true), service("ns", "web", svcPort("", 80)), older, newer)
	want := []string{`Warning RuleConflict host older.com path "/" (Prefix) is already served by the older Ingress ns/older; this rule is ignored`}
	if got := e.events(); !slices.Equal(got, want) {
		t.Errorf("events: got %q, want %q", got, want)
	}
	// An unrelated change rebuilds the Table; the conflict is not
	// reported again.
	tab := e.w.Table()
	if _, err := e.client.NetworkingV1().Ingresses("ns").Create(e.ctx, classed("ns", "third", "portal", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the third Ingress", func() bool { return e.w.Table() != tab && e.routes("third.com", "/") == "web(third.com /)" })
	if got := e.events(); len(got) != 0 {
		t.Errorf("events after an unrelated change: %q, want none", got)
	}
}

// A Service that appears later makes its rules servable.
func TestWatcherServiceAppears(t *testing.T) {
	e := startWatcher(t, WatcherOptions{}, portalClass(true), classed("ns", "a", "portal", ""))
	if got := e.routes("a.com", "/"); got != "503 service ns/web not found" {
		t.Fatalf("before the Service: %s", got)
	}
	if got := e.events(); !slices.Equal(got, []string{`Warning ServiceNotFound host a.com path "/": service ns/web not found`}) {
		t.Errorf("events: %q", got)
	}
	if _, err := e.client.CoreV1().Services("ns").Create(e.ctx, service("ns", "web", svcPort("", 80)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the Service", func() bool { return e.routes("a.com", "/") == "web(a.com /)" })
}

// The controller's own status updates must not rebuild the Table.
func TestSameIngress(t *testing.T) {
	base := classed("ns", "a", "portal", "")
	status := base.DeepCopy()
	status.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1"}}
	status.ResourceVersion = "9"
	annotated := base.DeepCopy()
	annotated.Annotations = map[string]string{AnnotationSSLRedirect: "false"}
	spec := base.DeepCopy()
	spec.Spec.Rules[0].Host = "b.com"
	for _, tc := range []struct {
		name string
		cur  *networkingv1.Ingress
		want bool
	}{
		{"status only", status, true},
		{"annotation", annotated, false},
		{"spec", spec, false},
	} {
		if got := sameIngress(base, tc.cur); got != tc.want {
			t.Errorf("%s: sameIngress = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSlimSecret(t *testing.T) {
	opaque := &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("x")},
		ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	tlsSec := &corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: []byte("c")}}
	o, _ := slimSecret(opaque)
	if s := o.(*corev1.Secret); s.Data != nil || s.ManagedFields != nil {
		t.Errorf("an Opaque Secret kept its data or managed fields in the cache")
	}
	o, _ = slimSecret(tlsSec)
	if s := o.(*corev1.Secret); len(s.Data) != 1 {
		t.Errorf("a TLS Secret lost its data")
	}
}
