package explain

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Explainer adds the live steps (DNS asked of the cluster DNS, node agents
// asked whether an endpoint's port listens, each node's proxy state) on
// top of CheckService. Build it with New.
type Explainer struct {
	cfg Config
}

// Config is what an Explainer needs to reach the cluster. Only Client is
// required: the DNS and the nodes are asked through it by default.
type Config struct {
	// Client reads the API and reaches the nodes (nodes/NAME/proxy).
	Client kubernetes.Interface
	// DNS asks the cluster DNS; nil: the kube-dns Service's cluster IP,
	// then the DNS servers behind it (see NewClusterDNS).
	DNS Resolver
	// Nodes asks the node agents; nil: through Client (see NewNodeProxy).
	Nodes NodeAsker
	// NodeTimeout bounds each question to a node (default 600ms): the
	// nodes are asked at once, so it bounds the whole live part.
	NodeTimeout time.Duration
	// ClusterDomain is the DNS zone of Services (default cluster.local).
	ClusterDomain string
	// MaxDials bounds the endpoints whose ports are dialed (default 20).
	MaxDials int
}

// New returns an Explainer using cfg.
func New(cfg Config) *Explainer {
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = 600 * time.Millisecond
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.MaxDials == 0 {
		cfg.MaxDials = 20
	}
	if cfg.Nodes == nil {
		cfg.Nodes = NewNodeProxy(cfg.Client)
	}
	if cfg.DNS == nil {
		cfg.DNS = NewClusterDNS(cfg.Client)
	}
	return &Explainer{cfg: cfg}
}

// Explain diagnoses target ("svc/NAME", "pod/NAME", "ingress/NAME",
// "IP:PORT", "IP" or "HOST") in namespace and returns the report. An
// error means the diagnosis itself could not run (the API did not
// answer); a broken target is a report whose Status is broken.
func (e *Explainer) Explain(ctx context.Context, namespace, target string) (*Report, error) {
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	kind, name, ok := strings.Cut(target, "/")
	if !ok {
		return e.explainAddress(ctx, namespace, target)
	}
	switch strings.ToLower(kind) {
	case "svc", "service", "services":
		return e.explainService(ctx, namespace, name, hit{})
	case "pod", "pods", "po":
		return e.explainPod(ctx, namespace, name)
	case "ingress", "ingresses", "ing":
		return e.explainIngress(ctx, namespace, name)
	}
	return nil, fmt.Errorf("explain %q: want svc/NAME, pod/NAME, ingress/NAME, IP:PORT or HOST", target)
}

// hit is how the user reaches a Service, when the target said: through a
// node's address (a NodePort), or a port of it.
type hit struct {
	node string
	port int32
	via  string
}

// explainService diagnoses the Service namespace/name; h, when set, is the
// node and port the user's traffic arrives at.
func (e *Explainer) explainService(ctx context.Context, namespace, name string, h hit) (*Report, error) {
	target := "svc/" + namespace + "/" + name
	svc, err := e.cfg.Client.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return newReport(target, []Step{e.serviceNotFound(ctx, namespace, name)}), nil
	case apierrors.IsForbidden(err):
		return newReport(target, []Step{{Name: "service", Status: StatusBroken,
			Message: "no permission to get services in namespace " + namespace + ": " + clean(err.Error())}}), nil
	case err != nil:
		return nil, fmt.Errorf("get service %s/%s: %w", namespace, name, err)
	}
	in, denied, err := e.gather(ctx, svc)
	if err != nil {
		return nil, err
	}
	var live liveResult
	var wg sync.WaitGroup
	wg.Go(func() { live = e.liveSteps(ctx, svc, in, h) })
	answers := e.serviceIngressAnswers(ctx, svc, in)
	wg.Wait()
	in.IngressAnswers = answers
	steps := CheckService(svc, in)
	steps = append(steps, denied...)
	if h.via != "" {
		steps[0].Evidence = append(steps[0].Evidence, "reached as "+h.via)
	}
	return newReport(target, placeLive(steps, live)), nil
}

// gather reads, in parallel, the objects CheckService needs for svc, each
// as narrowly as the API allows: the selected pods (the whole namespace's
// only when none match, for near matches), the Service's slices by label,
// the nodes, the namespace's Ingresses. A read refused for want of
// permission becomes a warning step naming it; other errors fail.
func (e *Explainer) gather(ctx context.Context, svc *corev1.Service) (Objects, []Step, error) {
	c, ns := e.cfg.Client, svc.Namespace
	var in Objects
	var mu sync.Mutex
	var denied []Step
	var firstErr error
	fail := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if apierrors.IsForbidden(err) {
			denied = append(denied, Step{Name: "permission", Status: StatusWarning,
				Message: "no permission to list " + what + "; the steps that need them are incomplete", Evidence: []string{clean(err.Error())}})
		} else if firstErr == nil {
			firstErr = fmt.Errorf("list %s: %w", what, err)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if len(svc.Spec.Selector) == 0 {
			return
		}
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
		if err == nil && len(pods.Items) == 0 {
			pods, err = c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		}
		if err != nil {
			fail("pods in namespace "+ns, err)
			return
		}
		in.Pods = ptrs(pods.Items)
		in.Events = e.probeEvents(ctx, svc, in.Pods)
	})
	wg.Go(func() {
		sl, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			fail("endpointslices in namespace "+ns, err)
			return
		}
		in.Slices = ptrs(sl.Items)
	})
	wg.Go(func() {
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			fail("nodes", err)
			return
		}
		in.Nodes = ptrs(nodes.Items)
	})
	wg.Go(func() {
		ings, err := c.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			fail("ingresses in namespace "+ns, err)
			return
		}
		in.Ingresses = ptrs(ings.Items)
	})
	wg.Wait()
	in.Services = []*corev1.Service{svc}
	return in, denied, firstErr
}

// probeEvents reads the Unhealthy events of the namespace when a selected
// pod is not ready: they hold the readiness probes' last failures.
func (e *Explainer) probeEvents(ctx context.Context, svc *corev1.Service, pods []*corev1.Pod) []*corev1.Event {
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	notReady := []string{}
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) && !podIsReady(p) {
			notReady = append(notReady, p.Name)
		}
	}
	if len(notReady) == 0 {
		return nil
	}
	fs := fields.Set{"reason": "Unhealthy", "involvedObject.kind": "Pod"}
	if len(notReady) == 1 {
		fs["involvedObject.name"] = notReady[0]
	}
	evs, err := e.cfg.Client.CoreV1().Events(svc.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fs.AsSelector().String()})
	if err != nil {
		return nil
	}
	return ptrs(evs.Items)
}

// serviceNotFound is the step for a Service that does not exist, with the
// close names in its namespace and the same name in other namespaces.
func (e *Explainer) serviceNotFound(ctx context.Context, namespace, name string) Step {
	st := Step{Name: "service", Status: StatusBroken, Message: fmt.Sprintf("Service %s not found in namespace %s", name, namespace)}
	var hints []string
	if list, err := e.cfg.Client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		for _, n := range closeNames(name, names, 3) {
			hints = append(hints, "svc/"+n)
		}
	}
	elsewhere := e.sameNameElsewhere(ctx, namespace, name)
	for _, ns := range elsewhere {
		hints = append(hints, fmt.Sprintf("svc/%s -n %s", name, ns))
	}
	if len(hints) > 0 {
		st.Message += "; did you mean " + strings.Join(hints, ", ") + "?"
	}
	return st
}

// sameNameElsewhere lists the other namespaces that have a Service name.
func (e *Explainer) sameNameElsewhere(ctx context.Context, namespace, name string) []string {
	list, err := e.cfg.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range list.Items {
		if s.Namespace != namespace && s.Name == name {
			out = append(out, s.Namespace)
		}
	}
	return out
}

// placeLive puts the live steps where they fall on the packet's path:
// DNS after the Service (and its load balancer), the dials after the
// endpoints, the nodes and latency after the traffic policy.
func placeLive(static []Step, live liveResult) []Step {
	var out []Step
	for i, s := range static {
		out = append(out, s)
		next := ""
		if i+1 < len(static) {
			next = static[i+1].Name
		}
		switch {
		case (s.Name == "service" || s.Name == "loadbalancer") && next != "loadbalancer":
			out = append(out, live.dns...)
			live.dns = nil
		case s.Name == "endpoints":
			out = append(out, live.dials...)
			live.dials = nil
			if next != "traffic-policy" {
				out = append(out, live.nodes...)
				live.nodes = nil
			}
		case s.Name == "traffic-policy":
			out = append(out, live.nodes...)
			live.nodes = nil
		}
	}
	out = append(out, live.dns...)
	out = append(out, live.dials...)
	return append(out, live.nodes...)
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// getIngress reads the Ingress namespace/name.
func (e *Explainer) getIngress(ctx context.Context, namespace, name string) (*networkingv1.Ingress, error) {
	return e.cfg.Client.NetworkingV1().Ingresses(namespace).Get(ctx, name, metav1.GetOptions{})
}
