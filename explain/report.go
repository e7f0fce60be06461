// Package explain diagnoses why a Service, Pod, Ingress or address does
// not answer. It walks the path a packet takes (Service, DNS, selector,
// endpoints, each node's proxy, Ingresses) and marks every step ok,
// warning or broken with the evidence that decided it.
//
// The static part, CheckService, is pure: objects in, steps out, so the
// browser view can run it on informer caches. The Explainer adds the live
// steps, asked of the cluster only through the API server (the cluster
// DNS, and the node agents' and proxies' status reached through the
// nodes/NAME/proxy subresource); it never touches a node directly.
package explain

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Status is the verdict on one step or on a whole report.
type Status string

// The verdicts, from best to worst.
const (
	StatusOK      Status = "ok"
	StatusWarning Status = "warning"
	StatusBroken  Status = "broken"
)

// rank orders statuses so that the worst of several can be taken.
func (s Status) rank() int {
	switch s {
	case StatusBroken:
		return 2
	case StatusWarning:
		return 1
	}
	return 0
}

// Worse reports whether s is a worse verdict than o.
func (s Status) Worse(o Status) bool { return s.rank() > o.rank() }

// Step is one point on the packet's path with its verdict. Name is one of
// "service", "dns", "selector", "endpoints", "endpoint/IP:PORT",
// "node/NAME", "ingress/NS/NAME", "loadbalancer", "latency".
type Step struct {
	Name     string   `json:"name"`
	Status   Status   `json:"status"`
	Message  string   `json:"message"`
	Evidence []string `json:"evidence,omitempty"`
	// Answers are, on an Ingress step, what the Ingress controller
	// answered the request sent for each of its rules.
	Answers []Answer `json:"answers,omitempty"`
}

// Report is the diagnosis of one target, its steps in path order. Target
// reads "svc/NS/NAME", "pod/NS/NAME", "ingress/NS/NAME" or the address
// asked about; Status is the worst step's.
type Report struct {
	Target string `json:"target"`
	Status Status `json:"status"`
	Steps  []Step `json:"steps"`
}

// Objects are the API objects CheckService judges a Service against: the
// pods, EndpointSlices and Ingresses of the Service's namespace, the
// nodes, the namespace's other Services (to suggest near matches), and
// its pods' Unhealthy events (for the readiness probes' last failures;
// nil leaves the pods' Ready condition as the only reason shown), and
// what the Ingress controller answered for the Ingresses' rules, by
// "NS/NAME" of the Ingress (nil: not asked, the rules are judged on the
// objects alone).
type Objects struct {
	Pods      []*corev1.Pod
	Slices    []*discoveryv1.EndpointSlice
	Nodes     []*corev1.Node
	Ingresses []*networkingv1.Ingress
	Services  []*corev1.Service
	Events    []*corev1.Event

	IngressAnswers map[string][]Answer
}

// Worst returns the worst status among steps, ok when there are none.
func Worst(steps []Step) Status {
	w := StatusOK
	for _, s := range steps {
		if s.Status.Worse(w) {
			w = s.Status
		}
	}
	return w
}

// newReport builds a report for target whose status is its worst step's.
func newReport(target string, steps []Step) *Report {
	return &Report{Target: target, Status: Worst(steps), Steps: steps}
}
