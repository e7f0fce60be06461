package ui

import (
	"fmt"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/tools/cache"
)

// ListReply is the answer of /ui/api/list: the map's slim form of every
// object of one kind, and the resourceVersion the page's watch of that
// kind continues from.
type ListReply struct {
	ResourceVersion string `json:"resourceVersion"`
	Items           []any  `json:"items"`
}

// Pod is what the map shows of a Pod. Its JSON is the shape the page's
// script makes of a Pod its watch delivers; the two must stay alike.
type Pod struct {
	Namespace string            `json:"ns"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels"`
	Node      string            `json:"node"`
	Phase     string            `json:"phase"`
	Ready     bool              `json:"ready"`
	IP        string            `json:"ip"`
}

// Slice is what the map shows of an EndpointSlice: the Service it serves
// and how many of its endpoints are ready.
type Slice struct {
	Namespace string `json:"ns"`
	Name      string `json:"name"`
	Service   string `json:"service"`
	Ready     int    `json:"ready"`
	Total     int    `json:"total"`
}

// Service is what the map shows of a Service.
type Service struct {
	Namespace    string            `json:"ns"`
	Name         string            `json:"name"`
	Type         string            `json:"type"`
	Selector     map[string]string `json:"selector"`
	ClusterIP    string            `json:"clusterIP"`
	ExternalName string            `json:"externalName"`
	Ports        []string          `json:"ports"`
}

// listKinds are the kinds /ui/api/list serves: the large ones, which
// the page would otherwise fetch whole from the API and throw most of
// away.
var listKinds = map[string]kind{
	"pods":           kindPods,
	"endpointslices": kindSlices,
	"services":       kindServices,
}

// serveList answers GET /ui/api/list?kind=K[&namespace=NS] with the slim
// form of the kind's objects in NS (every namespace when NS is empty),
// read from the server's caches. The caller must be allowed to list the
// kind there, as the API itself would require, and gets the 403 the API
// would give otherwise; the slim form holds nothing the list would not.
func (u *UI) serveList(w http.ResponseWriter, r *http.Request, who user.Info) {
	name := r.URL.Query().Get("kind")
	k, ok := listKinds[name]
	if !ok {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("kind %q is not served here; use the API", name))
		return
	}
	ns := r.URL.Query().Get("namespace")
	if !u.mayList(r.Context(), who, k, ns) {
		where := "at the cluster scope"
		if ns != "" {
			where = fmt.Sprintf("in the namespace %q", ns)
		}
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s is forbidden: User %q cannot list resource %q in API group %q %s",
			k.resource, who.GetName(), k.resource, k.group, where))
		return
	}
	if err := u.caches.wait(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, u.caches.list(name, ns))
}

// list returns the slim objects of kind in ns (all when empty). The
// resourceVersion is read before the objects, so the cache may already
// hold changes past it: the watch from there delivers them again, which
// the page applies idempotently, and misses none.
func (c *caches) list(kind, ns string) ListReply {
	inf := map[string]cache.SharedIndexInformer{"pods": c.pods, "endpointslices": c.slices, "services": c.svc}[kind]
	reply := ListReply{ResourceVersion: c.marks[kind].get(), Items: []any{}}
	var objs []any
	if ns == "" {
		objs = inf.GetStore().List()
	} else {
		objs, _ = inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	}
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Pod:
			reply.Items = append(reply.Items, slimPod(v))
		case *discoveryv1.EndpointSlice:
			reply.Items = append(reply.Items, slimSlice(v))
		case *corev1.Service:
			reply.Items = append(reply.Items, slimService(v))
		}
	}
	return reply
}

func slimPod(p *corev1.Pod) Pod {
	out := Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, Node: p.Spec.NodeName,
		Phase: string(p.Status.Phase), IP: p.Status.PodIP}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if out.Phase == "" {
		out.Phase = string(corev1.PodPending)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			out.Ready = true
		}
	}
	return out
}

// slimSlice counts an endpoint ready unless its ready condition is
// false, as consumers of EndpointSlices must read an unset one.
func slimSlice(s *discoveryv1.EndpointSlice) Slice {
	out := Slice{Namespace: s.Namespace, Name: s.Name, Service: s.Labels[discoveryv1.LabelServiceName], Total: len(s.Endpoints)}
	for _, e := range s.Endpoints {
		if e.Conditions.Ready == nil || *e.Conditions.Ready {
			out.Ready++
		}
	}
	return out
}

func slimService(s *corev1.Service) Service {
	out := Service{Namespace: s.Namespace, Name: s.Name, Type: string(s.Spec.Type), Selector: s.Spec.Selector,
		ClusterIP: s.Spec.ClusterIP, ExternalName: s.Spec.ExternalName, Ports: []string{}}
	if out.Type == "" {
		out.Type = string(corev1.ServiceTypeClusterIP)
	}
	for _, p := range s.Spec.Ports {
		port := strconv.Itoa(int(p.Port)) + "/" + string(p.Protocol)
		if p.Protocol == "" {
			port = strconv.Itoa(int(p.Port)) + "/TCP"
		}
		if p.Name != "" {
			port = p.Name + ":" + port
		}
		out.Ports = append(out.Ports, port)
	}
	return out
}
