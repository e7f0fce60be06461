package apilb

import (
	"context"
	"net"
	"slices"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Discover keeps b's server list current from the EndpointSlices of the
// kubernetes Service in the default namespace, which list every API server
// whose lease is live, until ctx ends. Its watch goes through b like the
// component's own.
func Discover(ctx context.Context, client kubernetes.Interface, b *Balancer) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(metav1.NamespaceDefault),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelServiceName + "=kubernetes"
		}))
	inf := factory.Discovery().V1().EndpointSlices().Informer()
	update := func() {
		var list []*discoveryv1.EndpointSlice
		for _, o := range inf.GetStore().List() {
			list = append(list, o.(*discoveryv1.EndpointSlice))
		}
		// An empty list says nothing about where the servers are (the
		// Service's objects were deleted, or not synced): keep what is known.
		if servers := ServersFromSlices(list); len(servers) > 0 {
			b.SetServers(servers)
		}
	}
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { update() },
		UpdateFunc: func(any, any) { update() },
		DeleteFunc: func(any) { update() },
	})
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}

// ServersFromSlices returns the host:port of every ready endpoint of the
// kubernetes Service's https port, sorted.
func ServersFromSlices(list []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range list {
		port := int32(0)
		for _, p := range s.Ports {
			if p.Port != nil && (p.Name == nil || *p.Name == "https" || len(s.Ports) == 1) {
				port = *p.Port
				break
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
