package route

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Application protocols of a Service port that make the server speak
// cleartext HTTP/2 to its endpoints.
const (
	AppProtocolH2C  = "kubernetes.io/h2c"
	AppProtocolGRPC = "grpc"
)

// backendKey names a Backend in the registry: a Service and a port as the
// Ingress names it (number or name).
type backendKey struct {
	service types.NamespacedName
	port    string
}

// resolveBackend returns the Backend for an Ingress backend in namespace
// ns, shared with every other rule naming the same Service port, and the
// problem that makes it unavailable ("" when none).
func (b *builder) resolveBackend(ns string, ib *networkingv1.IngressBackend) (*Backend, string, string) {
	if ib.Resource != nil {
		kind := ib.Resource.Kind
		msg := fmt.Sprintf("resource backends are not served by this controller (%s %s)", kind, ib.Resource.Name)
		return b.backend(backendKey{service: types.NamespacedName{Namespace: ns, Name: kind + "/" + ib.Resource.Name}, port: "resource"},
			&Backend{Unavailable: msg}), "ResourceBackend", msg
	}
	if ib.Service == nil {
		msg := "backend names neither a service nor a resource"
		return b.backend(backendKey{port: "invalid"}, &Backend{Unavailable: msg}), "InvalidBackend", msg
	}
	nn := types.NamespacedName{Namespace: ns, Name: ib.Service.Name}
	port := ib.Service.Port.Name
	if port == "" {
		port = strconv.Itoa(int(ib.Service.Port.Number))
	}
	key := backendKey{service: nn, port: port}
	want := &Backend{Service: nn, Port: port}
	b.services[nn] = struct{}{}
	svc := b.in.Sources.Service(nn)
	if svc == nil {
		want.Unavailable = fmt.Sprintf("service %s not found", nn)
		return b.backend(key, want), "ServiceNotFound", want.Unavailable
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		// Its name resolves elsewhere, and its endpoints, if any, are no
		// one's: requests go only to a Service's endpoints, as the proxy
		// sends them. ingress-nginx proxies to the name unless run with
		// --disable-svc-external-name; this is that setting, always.
		want.Unavailable = fmt.Sprintf("service %s is of type ExternalName (%s); this controller sends requests only to a Service's endpoints",
			nn, svc.Spec.ExternalName)
		return b.backend(key, want), "ExternalNameService", want.Unavailable
	}
	sp := servicePort(svc, ib.Service.Port)
	if sp == nil {
		want.Unavailable = fmt.Sprintf("service %s has no port %s", nn, port)
		return b.backend(key, want), "ServicePortNotFound", want.Unavailable
	}
	want.slicePort = sp.Name
	if ap := sp.AppProtocol; ap != nil && (*ap == AppProtocolH2C || *ap == AppProtocolGRPC) {
		want.Protocol = H2C
	}
	return b.backend(key, want), "", ""
}

// servicePort finds the Service port an Ingress backend names.
func servicePort(svc *corev1.Service, p networkingv1.ServiceBackendPort) *corev1.ServicePort {
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		if p.Name != "" && sp.Name == p.Name || p.Name == "" && sp.Port == p.Number {
			return sp
		}
	}
	return nil
}

// backend returns the registry's Backend for key, which must look like
// want. The previous build's Backend is kept when it does, so that its
// endpoints and whatever the server keeps per Backend carry over.
func (b *builder) backend(key backendKey, want *Backend) *Backend {
	if be := b.backends[key]; be != nil {
		return be
	}
	be := want
	if old := b.prevBackends[key]; old != nil && sameBackend(old, want) {
		be = old
	} else if want.Unavailable == "" {
		be.SetEndpoints(endpointsFrom(b.in.Sources.EndpointSlices(key.service), want.slicePort))
	}
	b.backends[key] = be
	if be.Unavailable == "" {
		b.byService[key.service] = append(b.byService[key.service], be)
	}
	return be
}

func sameBackend(a, b *Backend) bool {
	return a.Service == b.Service && a.Port == b.Port && a.Protocol == b.Protocol &&
		a.Unavailable == b.Unavailable && a.slicePort == b.slicePort
}

// endpointsFrom gathers the endpoints of a Service port from the
// Service's EndpointSlices. Ready endpoints are ready (an unset condition
// counts as ready, as upstream says) and not terminating; Fallback ones
// are serving and terminating. Addresses of both families are kept, each
// once, sorted.
func endpointsFrom(slices []*discoveryv1.EndpointSlice, portName string) *Endpoints {
	var ready, fallback []string
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		port, ok := slicePort(s, portName)
		if !ok {
			continue
		}
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			if len(ep.Addresses) == 0 {
				continue
			}
			addr, err := netip.ParseAddr(ep.Addresses[0])
			if err != nil {
				continue
			}
			hostPort := netip.AddrPortFrom(addr.Unmap(), port).String()
			c := ep.Conditions
			isReady := c.Ready == nil || *c.Ready
			terminating := c.Terminating != nil && *c.Terminating
			serving := isReady
			if c.Serving != nil {
				serving = *c.Serving
			}
			switch {
			case isReady && !terminating:
				ready = append(ready, hostPort)
			case serving && terminating:
				fallback = append(fallback, hostPort)
			}
		}
	}
	return &Endpoints{Ready: sortedUnique(ready), Fallback: sortedUnique(fallback)}
}

// slicePort returns the port number of the EndpointSlice port named name
// (an unnamed port is "").
func slicePort(s *discoveryv1.EndpointSlice, name string) (uint16, bool) {
	for _, p := range s.Ports {
		n := ""
		if p.Name != nil {
			n = *p.Name
		}
		if n == name && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			return uint16(*p.Port), true
		}
	}
	return 0, false
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

func sameEndpoints(a, b *Endpoints) bool {
	return slices.Equal(a.Ready, b.Ready) && slices.Equal(a.Fallback, b.Fallback)
}
