package explain

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// backendRef is one place an Ingress sends traffic to a Service.
type backendRef struct {
	where   string // "default backend" or "host/path"
	backend *networkingv1.IngressServiceBackend
}

// ingressBackends lists the Service backends of ing, the default first.
func ingressBackends(ing *networkingv1.Ingress) []backendRef {
	var out []backendRef
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil {
		out = append(out, backendRef{"default backend", b.Service})
	}
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		host := r.Host
		if host == "" {
			host = "*"
		}
		for _, p := range r.HTTP.Paths {
			if p.Backend.Service != nil {
				out = append(out, backendRef{clean(host + p.Path), p.Backend.Service})
			}
		}
	}
	return out
}

// ingressSteps judges every Ingress of svc's namespace that sends traffic
// to svc: the port it names must be one of the Service's.
func ingressSteps(svc *corev1.Service, ingresses []*networkingv1.Ingress) []Step {
	var out []Step
	for _, ing := range ingresses {
		if ing.Namespace != svc.Namespace {
			continue
		}
		var refs []backendRef
		for _, b := range ingressBackends(ing) {
			if b.backend.Name == svc.Name {
				refs = append(refs, b)
			}
		}
		if len(refs) > 0 {
			out = append(out, ingressStep(ing, svc, refs))
		}
	}
	return out
}

// ingressStep judges the backends refs of ing, which all name svc (nil:
// the Service does not exist).
func ingressStep(ing *networkingv1.Ingress, svc *corev1.Service, refs []backendRef) Step {
	st := Step{Name: "ingress/" + ing.Namespace + "/" + ing.Name, Status: StatusOK}
	var broken []string
	for _, r := range refs {
		want := backendPort(r.backend)
		line := fmt.Sprintf("%s -> %s:%s", r.where, r.backend.Name, want)
		switch {
		case svc == nil:
			broken = append(broken, fmt.Sprintf("%s: Service %s does not exist", r.where, r.backend.Name))
		case !servicePortExists(svc, r.backend.Port):
			broken = append(broken, fmt.Sprintf("%s: Service %s has no port %s (its ports: %s)", r.where, svc.Name, want, portsString(svc.Spec.Ports)))
		}
		st.Evidence = append(st.Evidence, line)
	}
	if addrs := ingressAddresses(ing); addrs != "" {
		st.Evidence = append(st.Evidence, "address "+addrs)
	}
	if len(broken) > 0 {
		st.Status = StatusBroken
		st.Message = broken[0]
		st.Evidence = append(broken[1:], st.Evidence...)
		return st
	}
	st.Message = fmt.Sprintf("%d route(s) to this Service", len(refs))
	return st
}

func backendPort(b *networkingv1.IngressServiceBackend) string {
	if b.Port.Name != "" {
		return clean(b.Port.Name)
	}
	return fmt.Sprint(b.Port.Number)
}

func servicePortExists(svc *corev1.Service, p networkingv1.ServiceBackendPort) bool {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return true // any port goes to the external name
	}
	for _, sp := range svc.Spec.Ports {
		if (p.Name != "" && sp.Name == p.Name) || (p.Name == "" && sp.Port == p.Number) {
			return true
		}
	}
	return false
}

func ingressAddresses(ing *networkingv1.Ingress) string {
	var out []string
	for _, in := range ing.Status.LoadBalancer.Ingress {
		out = append(out, in.IP+in.Hostname)
	}
	return strings.Join(out, ",")
}

// CheckIngress diagnoses an Ingress from objects in hand: each Service
// backend must exist and have the port named, and the Services behind it
// are checked as CheckService does. services are the Ingress namespace's.
func CheckIngress(ing *networkingv1.Ingress, in Objects) []Step {
	bySvc := map[string][]backendRef{}
	var order []string
	for _, b := range ingressBackends(ing) {
		if _, ok := bySvc[b.backend.Name]; !ok {
			order = append(order, b.backend.Name)
		}
		bySvc[b.backend.Name] = append(bySvc[b.backend.Name], b)
	}
	st := Step{Name: "ingress/" + ing.Namespace + "/" + ing.Name, Status: StatusOK,
		Message: fmt.Sprintf("%d backend Service(s)", len(order))}
	if ing.Spec.IngressClassName != nil {
		st.Evidence = append(st.Evidence, "class "+*ing.Spec.IngressClassName)
	}
	if len(order) == 0 {
		st.Status, st.Message = StatusBroken, "the Ingress sends traffic to no Service"
	}
	steps := []Step{st}
	for _, name := range order {
		svc := findService(in.Services, ing.Namespace, name)
		steps = append(steps, ingressStep(ing, svc, bySvc[name]))
		if svc != nil {
			for _, s := range CheckService(svc, in) {
				if !strings.HasPrefix(s.Name, "ingress/") {
					s.Message = "svc/" + name + ": " + s.Message
					steps = append(steps, s)
				}
			}
		}
	}
	return steps
}

func findService(list []*corev1.Service, ns, name string) *corev1.Service {
	for _, s := range list {
		if s.Namespace == ns && s.Name == name {
			return s
		}
	}
	return nil
}
