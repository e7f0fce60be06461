// Package status publishes the Ingress controller's addresses in
// status.loadBalancer.ingress of every Ingress the controller serves, which
// is what `kubectl get ingress` shows as ADDRESS and what tools such as
// external-dns read.
//
// The addresses come, as ingress-nginx takes them, from the first source
// configured: the Service named by --publish-service (its
// status.loadBalancer.ingress, else its spec.externalIPs, or the name of
// an ExternalName Service), else the --publish-status-address list, else
// the node the controller runs on (its ExternalIP addresses, else its
// InternalIP ones). While the source is unknown (the Service or Node does
// not exist) no status is written, so a restart does not blank addresses.
//
// The package owns status.loadBalancer of the Ingresses it serves and
// writes nothing else; it writes only through the status subresource and
// only when the addresses differ. Ingresses that stop being served are
// left as they are, as ingress-nginx leaves them: another controller may
// be writing them now, and clearing them would fight it. Several replicas
// of the controller run an Updater only while they hold the status Lease
// (package ingress elects one, as ingress-nginx does), so replicas that
// each publish their own node's address do not overwrite each other.
package status

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"portal.dev/portal/internal/loop"
	"portal.dev/portal/internal/nodeaddr"
)

// Options say which Ingresses are served and where their address comes
// from.
type Options struct {
	// Ours reports whether the controller serves an Ingress (class
	// selection); required.
	Ours func(*networkingv1.Ingress) bool
	// PublishService is "namespace/name" of the Service whose addresses
	// are published; "" to use the next source.
	PublishService string
	// PublishStatusAddress are IP addresses or host names published as
	// they are, when PublishService is empty.
	PublishStatusAddress []string
	// NodeName is the node the controller runs on, whose addresses are
	// published when neither of the above is set.
	NodeName string
	// Resync, optional, asks for every Ingress to be checked again each
	// time it yields: route.Watcher.Changed(), so that an Ingress that
	// Ours accepts only once the Watcher has seen a class change gets its
	// status without waiting for the Ingress to change.
	Resync <-chan struct{}
}

// Updater keeps the status of the served Ingresses equal to the
// controller's addresses. Make one with New.
type Updater struct {
	client    kubernetes.Interface
	o         Options
	ingresses networkinglisters.IngressLister
	services  corelisters.ServiceLister // set with PublishService
	nodes     corelisters.NodeLister    // set when publishing the node's addresses
	loop      *loop.Loop[string]
	// source watches the one Service or Node the addresses come from.
	source informers.SharedInformerFactory
}

// New returns an Updater that reads Ingresses and IngressClasses through
// factory, which the caller starts after New, and writes Ingress status
// through client. The Service or Node the addresses come from it watches
// alone, by name: the factory may be limited to a namespace
// (--watch-namespace) other than the Service's, and one object is all it
// needs of them. Run it once.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, o Options) *Updater {
	u := &Updater{client: client, o: o}
	u.loop = loop.New(loop.Config[string]{
		Name:           "ingress-status",
		Sync:           u.sync,
		RateLimiter:    workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
		ReportFailures: true,
		// Every served Ingress once the caches have synced, and again on
		// each Resync.
		Start:      func(context.Context) error { u.enqueueAll(); return nil },
		Background: []func(context.Context){u.resync},
	})
	ing := factory.Networking().V1().Ingresses()
	u.ingresses = ing.Lister()
	u.watch(ing.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    u.enqueueIfOurs,
		UpdateFunc: func(_, cur any) { u.enqueueIfOurs(cur) },
	})
	// A class change can make Ingresses ours.
	u.watch(factory.Networking().V1().IngressClasses().Informer(), u.onChange("", nil))
	switch {
	case o.PublishService != "":
		ns, name, _ := cache.SplitMetaNamespaceKey(o.PublishService)
		u.source = oneObject(client, ns, name)
		svc := u.source.Core().V1().Services()
		u.services = svc.Lister()
		u.watch(svc.Informer(), u.onChange(o.PublishService, func(obj any) []networkingv1.IngressLoadBalancerIngress {
			s, _ := obj.(*corev1.Service)
			return ServiceAddresses(s)
		}))
	case len(o.PublishStatusAddress) == 0:
		u.source = oneObject(client, "", o.NodeName)
		nodes := u.source.Core().V1().Nodes()
		u.nodes = nodes.Lister()
		u.watch(nodes.Informer(), u.onChange(o.NodeName, func(obj any) []networkingv1.IngressLoadBalancerIngress {
			n, _ := obj.(*corev1.Node)
			return NodeAddresses(n)
		}))
	}
	return u
}

// oneObject is an informer factory that lists and watches only the object
// named name (in namespace ns).
func oneObject(client kubernetes.Interface, ns, name string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
}

// watch registers h on inf; Run waits for it to have seen the first
// list, and removes it on return.
func (u *Updater) watch(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	u.loop.WatchOrLog(inf, h)
}

// Run writes the status of every served Ingress once the caches have
// synced, then keeps it up to date until ctx ends. Every goroutine it
// starts has stopped when it returns.
func (u *Updater) Run(ctx context.Context) error {
	if u.o.Ours == nil {
		return fmt.Errorf("ingress status: Options.Ours is required")
	}
	if u.nodes != nil && u.o.NodeName == "" {
		klog.InfoS("No address to publish in Ingress status: no publish service, status address or node name")
	}
	if u.source != nil {
		// Shut down once ctx ends, which the cancel deferred after
		// this makes sure of on an early return.
		defer u.source.Shutdown()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if u.source != nil {
		u.source.Start(ctx.Done())
	}
	u.loop.Run(ctx, 1)
	return nil
}

// resync checks every Ingress again each time Options.Resync yields,
// until ctx ends.
func (u *Updater) resync(ctx context.Context) {
	for {
		select {
		case <-u.o.Resync:
			u.enqueueAll()
		case <-ctx.Done():
			return
		}
	}
}

// sync makes the status of Ingress k show the controller's addresses,
// if the Ingress is served and the addresses are known.
func (u *Updater) sync(ctx context.Context, k string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return err
	}
	ing, err := u.ingresses.Ingresses(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	want, known := u.Addresses()
	if !known || !u.o.Ours(ing) || equal(ing.Status.LoadBalancer.Ingress, want) {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := u.writeStatus(ctx, ing, want)
		if apierrors.IsConflict(err) {
			// Written meanwhile: retry from the stored copy.
			if fresh, getErr := u.client.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{}); getErr == nil {
				ing = fresh
			}
		}
		return err
	})
}

// writeStatus writes want to ing's status unless it shows it already.
func (u *Updater) writeStatus(ctx context.Context, ing *networkingv1.Ingress, want []networkingv1.IngressLoadBalancerIngress) error {
	if equal(ing.Status.LoadBalancer.Ingress, want) {
		return nil
	}
	cp := ing.DeepCopy()
	cp.Status.LoadBalancer.Ingress = want
	_, err := u.client.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil && !apierrors.IsConflict(err):
		return fmt.Errorf("update status of ingress %s/%s: %w", ing.Namespace, ing.Name, err)
	case err == nil:
		klog.V(2).InfoS("Published the Ingress's address", "ingress", klog.KObj(ing), "addresses", show(want))
	}
	return err
}

// Addresses returns the addresses the controller publishes now, sorted,
// and whether their source is known (the Service or Node exists).
func (u *Updater) Addresses() ([]networkingv1.IngressLoadBalancerIngress, bool) {
	switch {
	case u.services != nil:
		ns, name, err := cache.SplitMetaNamespaceKey(u.o.PublishService)
		if err != nil {
			return nil, false
		}
		svc, err := u.services.Services(ns).Get(name)
		if err != nil {
			return nil, false
		}
		return ServiceAddresses(svc), true
	case u.nodes != nil:
		node, err := u.nodes.Get(u.o.NodeName)
		if err != nil {
			return nil, false
		}
		return NodeAddresses(node), true
	}
	return StaticAddresses(u.o.PublishStatusAddress), true
}

// ServiceAddresses are the addresses of a published Service, as
// ingress-nginx takes them: an ExternalName Service's name; else its
// load balancer's addresses; else its external IPs.
func ServiceAddresses(svc *corev1.Service) []networkingv1.IngressLoadBalancerIngress {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return sorted([]networkingv1.IngressLoadBalancerIngress{{Hostname: svc.Spec.ExternalName}})
	}
	var out []networkingv1.IngressLoadBalancerIngress
	for _, in := range svc.Status.LoadBalancer.Ingress {
		out = append(out, networkingv1.IngressLoadBalancerIngress{IP: in.IP, Hostname: in.Hostname})
	}
	if len(out) == 0 {
		return StaticAddresses(svc.Spec.ExternalIPs)
	}
	return sorted(out)
}

// NodeAddresses are a node's ExternalIP addresses, or its InternalIP
// ones when it has none, as ingress-nginx reports a node by default and
// as servicelb gives nodes' addresses to LoadBalancer Services
// (nodeaddr.Preferred, so both show a node alike).
func NodeAddresses(node *corev1.Node) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, a := range nodeaddr.Preferred(node) {
		out = append(out, networkingv1.IngressLoadBalancerIngress{IP: a.String()})
	}
	return sorted(out)
}

// StaticAddresses turns a list of IP addresses and host names into status
// entries; blanks are skipped.
func StaticAddresses(list []string) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, s := range list {
		switch s = strings.TrimSpace(s); {
		case s == "":
		case isIP(s):
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: s})
		default:
			out = append(out, networkingv1.IngressLoadBalancerIngress{Hostname: s})
		}
	}
	return sorted(out)
}

// sorted orders entries by IP, then host name, without duplicates, so
// that the same addresses always compare equal.
func sorted(in []networkingv1.IngressLoadBalancerIngress) []networkingv1.IngressLoadBalancerIngress {
	slices.SortFunc(in, func(a, b networkingv1.IngressLoadBalancerIngress) int {
		return cmp.Or(strings.Compare(a.IP, b.IP), strings.Compare(a.Hostname, b.Hostname))
	})
	return slices.CompactFunc(in, func(a, b networkingv1.IngressLoadBalancerIngress) bool {
		return a.IP == b.IP && a.Hostname == b.Hostname
	})
}

// equal compares a status, in any order, with sorted wanted addresses;
// ports are not published, so an entry with ports differs.
func equal(got, want []networkingv1.IngressLoadBalancerIngress) bool {
	if len(got) != len(want) {
		return false
	}
	for _, g := range got {
		if len(g.Ports) > 0 {
			return false
		}
	}
	return slices.EqualFunc(sorted(slices.Clone(got)), want, func(a, b networkingv1.IngressLoadBalancerIngress) bool {
		return a.IP == b.IP && a.Hostname == b.Hostname
	})
}

func (u *Updater) enqueueIfOurs(obj any) {
	ing, ok := obj.(*networkingv1.Ingress)
	if ok && u.o.Ours != nil && u.o.Ours(ing) {
		u.loop.Add(keyOf(ing))
	}
}

// onChange re-checks every Ingress after an event on the object named
// key (any object when key is ""); an update counts only when addrs, if
// given, tells different addresses, so that a node's heartbeats cost
// nothing.
func (u *Updater) onChange(key string, addrs func(any) []networkingv1.IngressLoadBalancerIngress) cache.ResourceEventHandler {
	f := func(obj any) {
		if key == "" || keyOf(obj) == key {
			u.enqueueAll()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: f,
		UpdateFunc: func(old, cur any) {
			if addrs == nil || !equal(addrs(old), addrs(cur)) {
				f(cur)
			}
		},
		DeleteFunc: f,
	}
}

// enqueueAll queues every served Ingress.
func (u *Updater) enqueueAll() {
	all, err := u.ingresses.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ing := range all {
		u.enqueueIfOurs(ing)
	}
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

func keyOf(obj any) string {
	k, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return k
}

func show(in []networkingv1.IngressLoadBalancerIngress) string {
	parts := make([]string, 0, len(in))
	for _, a := range in {
		parts = append(parts, cmp.Or(a.IP, a.Hostname))
	}
	return strings.Join(parts, ",")
}
