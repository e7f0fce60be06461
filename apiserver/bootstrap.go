package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"portal.dev/portal/apiserver/namespace"
	"portal.dev/portal/pki"
)

// SystemNamespaces exist from the start and cannot be deleted (but
// kube-node-lease, which upstream also lets users delete).
var SystemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

func addBootstrapHooks(s *genericapiserver.GenericAPIServer, o Options, ca *pki.CA, cidrs []netip.Prefix) error {
	b := &bootstrapper{o: o, cidrs: cidrs}
	if err := s.AddPostStartHook("portal-bootstrap", unlessStopped(b.run)); err != nil {
		return err
	}
	// Pre-shutdown hooks run while the server still serves, so its own
	// loopback client can still take it out of the endpoints.
	if err := s.AddPreShutdownHook("portal-leave-endpoints", func() error {
		if c := b.loopbackClient(); c != nil {
			return b.leave(c)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddPostStartHook("portal-namespace-controller", func(hc genericapiserver.PostStartHookContext) error {
		client, err := kubernetes.NewForConfig(hc.LoopbackClientConfig)
		if err != nil {
			return err
		}
		go namespace.New(client).Run(hc.Context)
		return nil
	}); err != nil {
		return err
	}
	return s.AddPostStartHook("portal-admin-kubeconfig", func(hc genericapiserver.PostStartHookContext) error {
		return writeAdminKubeconfig(o, ca)
	})
}

// unlessStopped wraps a post-start hook that waits for something: the
// generic API server treats a hook's error as fatal, and an error that the
// server's own stop caused is not a failure of the server.
func unlessStopped(hook genericapiserver.PostStartHookFunc) genericapiserver.PostStartHookFunc {
	return func(hc genericapiserver.PostStartHookContext) error {
		if err := hook(hc); err != nil && hc.Context.Err() == nil {
			return err
		}
		return nil
	}
}

func writeAdminKubeconfig(o Options, ca *pki.CA) error {
	path := AdminKubeconfigPath(o.DataDir)
	cert, key, err := ca.IssueClient("admin", []string{"system:masters"})
	if err != nil {
		return err
	}
	host := o.BindAddress.String()
	if o.BindAddress.IsUnspecified() {
		host = "127.0.0.1"
	}
	return pki.WriteKubeconfig(path, pki.Kubeconfig{
		Server: "https://" + net.JoinHostPort(host, fmt.Sprint(o.SecurePort)),
		CAPEM:  ca.CertPEM, User: "admin", CertPEM: cert, KeyPEM: key,
	})
}

// bootstrapper keeps the API's own objects in place: the system namespaces
// and the kubernetes Service with its endpoints.
type bootstrapper struct {
	o     Options
	cidrs []netip.Prefix

	// mu makes a reconcile pass and leave exclusive: a pass running as the
	// server shuts down must not renew the lease leave deleted.
	mu     sync.Mutex
	client kubernetes.Interface
	left   bool
	// seen is when this server first saw each peer lease's current
	// renewTime: a peer is judged dead by how long this server watched
	// its lease stand still, not by the renewTime alone (see peerDeadLocked).
	seen map[string]peerSighting
	// now is time.Now unless a test sets it.
	now func() time.Time
}

func (b *bootstrapper) loopbackClient() kubernetes.Interface {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.client
}

func (b *bootstrapper) run(hc genericapiserver.PostStartHookContext) error {
	cfg := rest.CopyConfig(hc.LoopbackClientConfig)
	// The kubernetes Endpoints object is kept on purpose; its deprecation
	// warning is for users.
	cfg.WarningHandler = rest.NoWarnings{}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.client = client
	b.mu.Unlock()
	ctx := hc.Context
	// The first pass must finish before the server reports ready.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := b.reconcile(ctx, client)
		if err == nil {
			err = ensureIngressClass(ctx, client, b.o.IngressClass, b.o.IngressController)
		}
		if err != nil {
			klog.InfoS("Bootstrap not done yet", "err", err)
			return false, nil
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := b.reconcile(ctx, client); err != nil {
			klog.ErrorS(err, "Bootstrap reconcile failed")
		}
	}, peerRenewInterval)
	return nil
}

func (b *bootstrapper) reconcile(ctx context.Context, client kubernetes.Interface) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left {
		return nil
	}
	for _, name := range SystemNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
	}
	if err := b.renewLease(ctx, client); err != nil {
		// The peers may have failed to renew for the same reason: judge
		// them afresh once the API answers.
		b.seen = nil
		return err
	}
	peers, err := b.livePeersLocked(ctx, client, true)
	if err != nil {
		b.seen = nil
		return err
	}
	if err := b.reconcileService(ctx, client, peers); err != nil {
		return err
	}
	if err := b.reconcileEndpoints(ctx, client, peers); err != nil {
		return err
	}
	return b.reconcileEndpointSlice(ctx, client, peers)
}

// ensureIngressClass creates the IngressClass name of controller, marked
// as the default class, unless one of that name exists. It runs once per
// start, not in the periodic pass, as add-on managers treat objects they
// only ensure exist: a user's edits (unmarking it as default, say) are
// kept, and a deleted class stays deleted until the next start. To be rid
// of it for good, leave the ingress component out of the server.
func ensureIngressClass(ctx context.Context, client kubernetes.Interface, name, controller string) error {
	if name == "" {
		return nil
	}
	ic := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: controller},
	}
	_, err := client.NetworkingV1().IngressClasses().Create(ctx, ic, metav1.CreateOptions{})
	switch {
	case err == nil:
		klog.InfoS("Created the default IngressClass", "ingressClass", name, "controller", controller)
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("ingress class %s: %w", name, err)
	}
	return nil
}

func (b *bootstrapper) kubernetesService(port int32) *corev1.Service {
	var ips []string
	var families []corev1.IPFamily
	for _, p := range b.cidrs {
		ips = append(ips, FirstServiceIP(p).String())
		families = append(families, ipFamily(p.Addr()))
	}
	policy := corev1.IPFamilyPolicySingleStack
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{
			Type:            corev1.ServiceTypeClusterIP,
			ClusterIP:       ips[0],
			ClusterIPs:      ips[:1],
			IPFamilies:      families[:1],
			IPFamilyPolicy:  &policy,
			SessionAffinity: corev1.ServiceAffinityNone,
			Ports: []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443,
				TargetPort: intstr.FromInt32(port)}},
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

func (b *bootstrapper) reconcileService(ctx context.Context, client kubernetes.Interface, peers peerSet) error {
	want := b.kubernetesService(peers.port)
	svcs := client.CoreV1().Services("default")
	got, err := svcs.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = svcs.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(got.Spec.Ports, want.Spec.Ports) && got.Spec.Type == want.Spec.Type {
		return nil
	}
	got.Spec.Ports, got.Spec.Type = want.Spec.Ports, want.Spec.Type
	_, err = svcs.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

func (b *bootstrapper) reconcileEndpoints(ctx context.Context, client kubernetes.Interface, peers peerSet) error {
	var addrs []corev1.EndpointAddress
	for _, a := range peers.addrs {
		addrs = append(addrs, corev1.EndpointAddress{IP: a.String()})
	}
	want := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: addrs,
			Ports:     []corev1.EndpointPort{{Name: "https", Port: peers.port, Protocol: corev1.ProtocolTCP}},
		}},
	}
	eps := client.CoreV1().Endpoints("default")
	got, err := eps.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = eps.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil || apiequality.Semantic.DeepEqual(got.Subsets, want.Subsets) {
		return err
	}
	got.Subsets = want.Subsets
	_, err = eps.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

func (b *bootstrapper) reconcileEndpointSlice(ctx context.Context, client kubernetes.Interface, peers peerSet) error {
	var endpoints []discoveryv1.Endpoint
	for _, a := range peers.addrs {
		endpoints = append(endpoints, discoveryv1.Endpoint{Addresses: []string{a.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{
				discoveryv1.LabelServiceName: "kubernetes",
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
			}},
		AddressType: discoveryv1.AddressType(ipFamily(peers.addrs[0])),
		Endpoints:   endpoints,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(peers.port),
			Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	slices := client.DiscoveryV1().EndpointSlices("default")
	got, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil || (apiequality.Semantic.DeepEqual(got.Endpoints, want.Endpoints) &&
		apiequality.Semantic.DeepEqual(got.Ports, want.Ports) && got.AddressType == want.AddressType) {
		return err
	}
	if got.AddressType != want.AddressType {
		// addressType is immutable: replace the slice.
		if err := slices.Delete(ctx, got.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	got.Endpoints, got.Ports = want.Endpoints, want.Ports
	_, err = slices.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

func ipFamily(a netip.Addr) corev1.IPFamily {
	if a.Is4() || a.Is4In6() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}
