package explain

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// backendRef is one place an Ingress sends traffic to a Service.
type backendRef struct {
	where      string // "default backend" or "host/path"
	host, path string // the rule's, as written
	backend    *networkingv1.IngressServiceBackend
}

// ingressBackends lists the Service backends of ing, the default first.
func ingressBackends(ing *networkingv1.Ingress) []backendRef {
	var out []backendRef
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil {
		out = append(out, backendRef{where: "default backend", backend: b.Service})
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
				out = append(out, backendRef{where: clean(host + p.Path), host: r.Host, path: p.Path, backend: p.Backend.Service})
			}
		}
	}
	return out
}

// ingressSteps judges every Ingress of svc's namespace that sends traffic
// to svc: the port it names must be one of the Service's, and the
// controller's answers, when asked, must reach it.
func ingressSteps(svc *corev1.Service, ingresses []*networkingv1.Ingress, answers map[string][]Answer) []Step {
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
			out = append(out, ingressStep(ing, svc, refs, answers[ing.Namespace+"/"+ing.Name]))
		}
	}
	return out
}

// ingressStep judges the backends refs of ing, which all name svc (nil:
// the Service does not exist), and what the controller answered for them
// (answers, none when it was not asked). The worst rule's verdict is the
// step's, and its message names the rule and, when asked, the answer.
func ingressStep(ing *networkingv1.Ingress, svc *corev1.Service, refs []backendRef, answers []Answer) Step {
	st := Step{Name: "ingress/" + ing.Namespace + "/" + ing.Name, Status: StatusOK}
	var worst string
	var ok []string
	for _, r := range refs {
		status, msg := StatusOK, ""
		switch {
		case svc == nil:
			status, msg = StatusBroken, fmt.Sprintf("%s: Service %s does not exist", r.where, r.backend.Name)
		case !servicePortExists(svc, r.backend.Port):
			status, msg = StatusBroken, fmt.Sprintf("%s: Service %s has no port %s (its ports: %s)", r.where, svc.Name, backendPort(r.backend), portsString(svc.Spec.Ports))
		}
		for _, a := range answersFor(answers, r.where) {
			st.Answers = append(st.Answers, a)
			if a.Verdict.Worse(status) {
				status = a.Verdict
			}
			msg = joinNonEmpty("; the Ingress controller: ", msg, a.Message)
			if e := answerEvidence(a); e != "" {
				st.Evidence = append(st.Evidence, e)
			}
		}
		st.Evidence = append(st.Evidence, fmt.Sprintf("%s -> %s:%s", r.where, r.backend.Name, backendPort(r.backend)))
		switch {
		case status.Worse(st.Status):
			st.Status, worst = status, msg
		case status == StatusOK && msg != "":
			ok = append(ok, msg)
		}
	}
	if addrs := ingressAddresses(ing); addrs != "" {
		st.Evidence = append(st.Evidence, "address "+addrs)
	}
	st.Message = worst
	if st.Status == StatusOK {
		st.Message = fmt.Sprintf("%d route(s) to this Service", len(refs))
		if len(ok) > 0 {
			st.Message += ": " + strings.Join(firstN(ok, 3), "; ")
		}
	}
	return st
}

// joinNonEmpty joins a and b with sep, leaving out an empty one.
func joinNonEmpty(sep, a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + sep + b
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
		steps = append(steps, ingressStep(ing, svc, bySvc[name], in.IngressAnswers[ing.Namespace+"/"+ing.Name]))
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
