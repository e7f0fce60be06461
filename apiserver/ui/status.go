package ui

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"portal.dev/portal/explain"
)

// StatusReply is the answer of /ui/api/status: the verdict on each Service
// asked about, and the kinds the caller may not list, which the verdicts
// were judged without.
type StatusReply struct {
	Namespace string          `json:"namespace"`
	Services  []ServiceStatus `json:"services"`
	Denied    []string        `json:"denied,omitempty"`
}

// ServiceStatus is one Service's verdict. Status is "unknown" when the
// caller may not list the pods or EndpointSlices it depends on.
type ServiceStatus struct {
	Name   string         `json:"name"`
	Status string         `json:"status"`
	Steps  []explain.Step `json:"steps,omitempty"`
}

// kind is one resource the status is judged from, as the authorizer names it.
type kind struct {
	group, resource string
	namespaced      bool
}

var (
	kindServices  = kind{"", "services", true}
	kindPods      = kind{"", "pods", true}
	kindSlices    = kind{"discovery.k8s.io", "endpointslices", true}
	kindNodes     = kind{"", "nodes", false}
	kindIngresses = kind{"networking.k8s.io", "ingresses", true}
)

// serveStatus answers GET /ui/api/status?namespace=NS[&service=NAME...]
// with CheckService's verdict on the namespace's Services (or the ones
// named), judged from the server's caches but only from the kinds the
// caller may list: what they may not, CheckService does not see.
func (u *UI) serveStatus(w http.ResponseWriter, r *http.Request, who user.Info) {
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		writeError(w, http.StatusBadRequest, "namespace is required")
		return
	}
	allowed := func(k kind) bool { return u.mayList(r.Context(), who, k, ns) }
	if !allowed(kindServices) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("services is forbidden: User %q cannot list services in the namespace %q", who.GetName(), ns))
		return
	}
	if err := u.caches.wait(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	objs := u.caches.namespace(ns)
	reply := StatusReply{Namespace: ns, Services: []ServiceStatus{}}
	blind := false
	for _, k := range []kind{kindPods, kindSlices, kindNodes, kindIngresses} {
		if allowed(k) {
			continue
		}
		reply.Denied = append(reply.Denied, k.resource)
		switch k {
		case kindPods:
			objs.pods, blind = nil, true
		case kindSlices:
			objs.slices, blind = nil, true
		case kindNodes:
			objs.nodes = nil
		case kindIngresses:
			objs.ingresses = nil
		}
	}
	reply.Services = judge(objs, r.URL.Query()["service"], blind)
	writeJSON(w, http.StatusOK, reply)
}

// mayList asks the authorizer whether who may list k in ns.
func (u *UI) mayList(ctx context.Context, who user.Info, k kind, ns string) bool {
	attrs := authorizer.AttributesRecord{
		User: who, Verb: "list", APIGroup: k.group, APIVersion: "*", Resource: k.resource, ResourceRequest: true,
	}
	if k.namespaced {
		attrs.Namespace = ns
	}
	d, _, err := u.cfg.Authorizer.Authorize(ctx, attrs)
	return err == nil && d == authorizer.DecisionAllow
}

// judge runs CheckService on each Service of objs, or on those named. A
// blind judgement (pods or slices unseen) would call every Service broken,
// so it reports them unknown instead.
func judge(objs namespaceObjects, only []string, blind bool) []ServiceStatus {
	want := map[string]bool{}
	for _, n := range only {
		want[n] = true
	}
	idx := indexPods(objs.pods)
	slices := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range objs.slices {
		name := s.Labels[discoveryv1.LabelServiceName]
		slices[name] = append(slices[name], s)
	}
	out := []ServiceStatus{}
	for _, svc := range objs.services {
		if len(want) > 0 && !want[svc.Name] {
			continue
		}
		if blind {
			out = append(out, ServiceStatus{Name: svc.Name, Status: "unknown"})
			continue
		}
		steps := explain.CheckService(svc, explain.Objects{
			Pods: idx.candidates(svc.Spec.Selector), Slices: slices[svc.Name],
			Nodes: objs.nodes, Ingresses: objs.ingresses, Services: objs.services,
		})
		out = append(out, ServiceStatus{Name: svc.Name, Status: string(explain.Worst(steps)), Steps: steps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// podIndex finds the pods a selector may match without testing every pod
// of the namespace for every Service: a thousand Services over ten
// thousand pods would otherwise be ten million label matches per answer.
type podIndex struct {
	all    []*corev1.Pod
	byPair map[string][]*corev1.Pod
}

func indexPods(pods []*corev1.Pod) podIndex {
	idx := podIndex{all: pods, byPair: map[string][]*corev1.Pod{}}
	for _, p := range pods {
		for k, v := range p.Labels {
			idx.byPair[k+"="+v] = append(idx.byPair[k+"="+v], p)
		}
	}
	return idx
}

// candidates returns the pods sel matches; when it matches none, it
// returns every pod, so that CheckService can name the nearest labels.
func (idx podIndex) candidates(sel map[string]string) []*corev1.Pod {
	if len(sel) == 0 {
		return idx.all
	}
	var narrow []*corev1.Pod
	first := true
	for k, v := range sel {
		if l := idx.byPair[k+"="+v]; first || len(l) < len(narrow) {
			narrow, first = l, false
		}
	}
	matcher := labels.SelectorFromSet(sel)
	var out []*corev1.Pod
	for _, p := range narrow {
		if matcher.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return idx.all
	}
	return out
}
