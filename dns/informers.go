package dns

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"portal.dev/portal/dns/index"
)

// setupInformers watches Services, EndpointSlices and Namespaces (and Pods
// for verified pod records). Each informer's transform turns an object into
// a record holding the index's own entry, so the informer's store and the
// index share one copy of what DNS needs and nothing else is kept. Each
// event updates the index for that one object.
func (s *Server) setupInformers(client kubernetes.Interface, pods bool) {
	f := informers.NewSharedInformerFactory(client, 0)
	s.factory = f
	add := func(inf cache.SharedIndexInformer, transform cache.TransformFunc, set func(r *record), del func(ns, name string)) {
		if err := inf.SetTransform(transform); err != nil {
			klog.ErrorS(err, "Informer transform not set")
		}
		setAny := func(obj any) {
			if r, ok := obj.(*record); ok {
				set(r)
			}
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    setAny,
			UpdateFunc: func(_, obj any) { setAny(obj) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if r, ok := obj.(*record); ok {
					del(r.namespace, r.name)
				}
			},
		})
		if err != nil {
			klog.ErrorS(err, "Informer handler not added")
			return
		}
		s.synced = append(s.synced, reg.HasSynced)
	}
	add(f.Core().V1().Services().Informer(), slimService,
		func(r *record) { s.idx.SetService(r.value.(*index.Service)) }, s.idx.DeleteService)
	add(f.Discovery().V1().EndpointSlices().Informer(), slimEndpointSlice,
		func(r *record) { s.idx.SetEndpointSlice(r.value.(*index.EndpointSlice)) }, s.idx.DeleteEndpointSlice)
	add(f.Core().V1().Namespaces().Informer(), slimNamespace,
		func(r *record) { s.idx.SetNamespace(r.name) }, func(_, name string) { s.idx.DeleteNamespace(name) })
	if pods {
		add(f.Core().V1().Pods().Informer(), slimPod,
			func(r *record) { s.idx.SetPod(r.namespace, r.name, r.value.([]netip.Addr)) }, s.idx.DeletePod)
	}
}

// record is what an informer keeps of an object: the name, namespace and
// resourceVersion its machinery reads (through GetObjectMeta), and the
// index's entry for it: *index.Service, *index.EndpointSlice, the IPs of a
// Pod, or nothing for a Namespace. A corev1.Service is about 1 KiB of
// mostly empty fields; a record and its entry are a fraction of that.
type record struct {
	namespace, name, resourceVersion string
	value                            any
}

func newRecord(m *metav1.ObjectMeta, value any) *record {
	return &record{namespace: m.Namespace, name: m.Name, resourceVersion: m.ResourceVersion, value: value}
}

// GetObjectMeta lets meta.Accessor (and so the informer's key function)
// read the record.
func (r *record) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: r.namespace, Name: r.name, ResourceVersion: r.resourceVersion}
}

// GetObjectKind is part of runtime.Object; records carry no kind.
func (r *record) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is part of runtime.Object; the entry is never changed
// after creation, so sharing it is safe.
func (r *record) DeepCopyObject() runtime.Object { c := *r; return &c }

func slimService(obj any) (any, error) {
	if svc, ok := obj.(*corev1.Service); ok {
		return newRecord(&svc.ObjectMeta, toService(svc)), nil
	}
	return obj, nil
}

func slimEndpointSlice(obj any) (any, error) {
	if sl, ok := obj.(*discoveryv1.EndpointSlice); ok {
		return newRecord(&sl.ObjectMeta, toEndpointSlice(sl)), nil
	}
	return obj, nil
}

func slimNamespace(obj any) (any, error) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		return newRecord(&ns.ObjectMeta, nil), nil
	}
	return obj, nil
}

func slimPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return newRecord(&p.ObjectMeta, podIPs(p)), nil
	}
	return obj, nil
}

func podIPs(p *corev1.Pod) []netip.Addr {
	var out []netip.Addr
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// toService converts a (slim) Service for the index.
func toService(svc *corev1.Service) *index.Service {
	out := &index.Service{Namespace: svc.Namespace, Name: svc.Name, PublishNotReady: svc.Spec.PublishNotReadyAddresses}
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		out.Kind = index.ExternalName
		out.ExternalName = svc.Spec.ExternalName
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		out.Kind = index.Headless
	default:
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, ip := range ips {
			if a, err := netip.ParseAddr(ip); err == nil {
				out.ClusterIPs = append(out.ClusterIPs, a)
			}
		}
	}
	for _, p := range svc.Spec.Ports {
		out.Ports = append(out.Ports, index.Port{Name: p.Name, Protocol: protocol(p.Protocol), Port: p.Port})
	}
	return out
}

func protocol(p corev1.Protocol) string {
	if p == "" {
		return string(corev1.ProtocolTCP)
	}
	return string(p)
}

// toEndpointSlice converts a (slim) EndpointSlice for the index. FQDN
// slices carry no addresses DNS can serve.
func toEndpointSlice(sl *discoveryv1.EndpointSlice) *index.EndpointSlice {
	out := &index.EndpointSlice{Namespace: sl.Namespace, Name: sl.Name, Service: sl.Labels[discoveryv1.LabelServiceName]}
	if sl.AddressType == discoveryv1.AddressTypeFQDN {
		return out
	}
	for _, p := range sl.Ports {
		if p.Port == nil {
			continue
		}
		ip := index.Port{Port: *p.Port, Protocol: string(corev1.ProtocolTCP)}
		if p.Name != nil {
			ip.Name = *p.Name
		}
		if p.Protocol != nil {
			ip.Protocol = protocol(*p.Protocol)
		}
		out.Ports = append(out.Ports, ip)
	}
	out.Endpoints = make([]index.Endpoint, 0, len(sl.Endpoints))
	for _, e := range sl.Endpoints {
		ep := index.Endpoint{Ready: e.Conditions.Ready == nil || *e.Conditions.Ready}
		if e.Hostname != nil {
			ep.Hostname = *e.Hostname
		}
		for _, a := range e.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil {
				ep.Addresses = append(ep.Addresses, ip.Unmap())
			}
		}
		if len(ep.Addresses) > 0 {
			out.Endpoints = append(out.Endpoints, ep)
		}
	}
	return out
}
