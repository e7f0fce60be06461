package explain

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/agent/dialcheck"
	"portal.dev/portal/proxy/status"
)

// liveResult are the steps asked of the running cluster.
type liveResult struct {
	dns, dials, nodes []Step
}

// liveSteps asks, all at once, the cluster DNS, the agents of the
// endpoints' nodes (does the port listen) and every node's proxy (what it
// programmed), each question bounded by NodeTimeout.
func (e *Explainer) liveSteps(ctx context.Context, svc *corev1.Service, in Objects, h hit) liveResult {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.NodeTimeout+200*time.Millisecond)
	defer cancel()
	var out liveResult
	var wg sync.WaitGroup
	wg.Go(func() { out.dns = []Step{e.dnsStep(ctx, svc)} })
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		wg.Wait()
		return out
	}
	wg.Go(func() { out.dials = e.dialSteps(ctx, svc, in) })
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		wg.Go(func() { out.nodes = e.nodeSteps(ctx, svc, in, h) })
	}
	wg.Wait()
	return out
}

// dialSteps asks each endpoint's node whether anything listens on the
// endpoint's ports, up to MaxDials endpoints.
func (e *Explainer) dialSteps(ctx context.Context, svc *corev1.Service, in Objects) []Step {
	type job struct {
		node, addr, proto string
	}
	var jobs []job
	var unchecked []Step
	for _, ep := range sliceEndpoints(svc, in.Slices) {
		if ep.node == "" {
			continue
		}
		for _, p := range ep.ports {
			a, err := netip.ParseAddr(ep.addr)
			if err != nil {
				continue
			}
			addr := netip.AddrPortFrom(a, uint16(p)).String()
			if hostNetworkEndpoint(svc.Namespace, ep, in) {
				unchecked = append(unchecked, Step{Name: "endpoint/" + addr, Status: StatusOK,
					Message: "hostNetwork endpoint: not checked (its address is node " + ep.node + "'s own, which the agent does not dial)"})
				continue
			}
			jobs = append(jobs, job{ep.node, addr, string(servicePortProtocol(svc, p, in))})
		}
	}
	jobs = jobs[:min(len(jobs), e.cfg.MaxDials)]
	steps := make([]Step, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, e.cfg.NodeTimeout)
			defer cancel()
			res, err := e.cfg.Nodes.Dial(ctx, j.node, j.addr, j.proto)
			steps[i] = dialStep(j.node, j.addr, res, err)
		})
	}
	wg.Wait()
	return append(steps, unchecked...)
}

// hostNetworkEndpoint says whether ep is a hostNetwork pod's: its pod says
// so, or its address is one of its node's. The agent's /dial reaches only
// its pods' own addresses, never the node's (that would expose every
// socket the node binds), so such an endpoint is not dialed; asking would
// only come back as a 403 that reads like a missing permission.
func hostNetworkEndpoint(namespace string, ep endpoint, in Objects) bool {
	for _, p := range in.Pods {
		if p.Namespace == namespace && p.Name == ep.pod && p.Spec.HostNetwork {
			return true
		}
	}
	for _, n := range in.Nodes {
		if n.Name != ep.node {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Address == ep.addr {
				return true
			}
		}
	}
	return false
}

// servicePortProtocol is the protocol of the slice port numbered p.
func servicePortProtocol(svc *corev1.Service, p int32, in Objects) corev1.Protocol {
	for _, s := range in.Slices {
		for _, sp := range s.Ports {
			if sp.Port != nil && *sp.Port == p && sp.Protocol != nil {
				return *sp.Protocol
			}
		}
	}
	return corev1.ProtocolTCP
}

func dialStep(node, addr string, res dialcheck.Result, err error) Step {
	st := Step{Name: "endpoint/" + addr}
	if err != nil {
		st.Message, st.Status = askError(node, err)
		st.Message = "could not check whether anything listens: " + st.Message
		return st
	}
	from := fmt.Sprintf("dialed from %s in %dms", node, res.Millis)
	switch res.Result {
	case dialcheck.Open:
		st.Status, st.Message = StatusOK, "listening ("+from+")"
	case dialcheck.Refused:
		st.Status, st.Message = StatusBroken, fmt.Sprintf("nothing listens on %s: connection refused (%s)", addr, from)
	case dialcheck.Timeout:
		st.Status, st.Message = StatusBroken, fmt.Sprintf("no answer from %s: the connection timed out (%s)", addr, from)
	case dialcheck.Unchecked:
		st.Status, st.Message = StatusOK, res.Protocol+" port: not checked by dialing"
	default:
		st.Status, st.Message = StatusBroken, fmt.Sprintf("%s is unreachable from %s", addr, node)
	}
	if res.Error != "" {
		st.Evidence = append(st.Evidence, clean(res.Error))
	}
	return st
}

// nodeSteps asks every node's proxy what it programmed for svc and judges
// it against the EndpointSlices, then adds the programming latency.
func (e *Explainer) nodeSteps(ctx context.Context, svc *corev1.Service, in Objects, h hit) []Step {
	nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	nodes := slices.Clone(in.Nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	steps := make([]Step, len(nodes))
	stats := make([]*status.Service, len(nodes))
	current := make([]bool, len(nodes))
	want := wantedEndpoints(svc, in)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i, n := range nodes {
		if !nodeReady(n) {
			steps[i] = Step{Name: "node/" + n.Name, Status: StatusWarning, Message: "node " + n.Name + " is not Ready; its proxy was not asked"}
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(ctx, e.cfg.NodeTimeout)
			defer cancel()
			st, err := e.cfg.Nodes.ProxyStatus(ctx, n.Name, nn)
			if err != nil {
				steps[i] = Step{Name: "node/" + n.Name}
				steps[i].Message, steps[i].Status = askError(n.Name, err)
				return
			}
			stats[i] = &st
			steps[i] = judgeNode(svc, n.Name, st, want, h.node == n.Name)
			current[i] = sameEndpoints(st, want)
		})
	}
	wg.Wait()
	if st, ok := latencyStep(in, stats, current); ok {
		steps = append(steps, st)
	}
	return steps
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// wantedEndpoints are the ready endpoints of the EndpointSlices as the
// proxy writes them: IP:PORT.
func wantedEndpoints(svc *corev1.Service, in Objects) map[string]bool {
	out := map[string]bool{}
	for _, ep := range sliceEndpoints(svc, in.Slices) {
		a, err := netip.ParseAddr(ep.addr)
		if err != nil || !ep.ready {
			continue
		}
		for _, p := range ep.ports {
			out[netip.AddrPortFrom(a, uint16(p)).String()] = true
		}
	}
	return out
}

// sameEndpoints says whether a proxy programmed exactly the ready
// endpoints want, with nothing pending.
func sameEndpoints(st status.Service, want map[string]bool) bool {
	have := map[string]bool{}
	for _, ep := range st.Endpoints {
		if ep.Ready {
			if !want[ep.Address] {
				return false
			}
			have[ep.Address] = true
		}
	}
	return st.Programmed && !st.Pending && len(have) == len(want)
}

// judgeNode compares what a node's proxy programmed with the slices.
// hitHere is set when the user's traffic arrives at this node.
func judgeNode(svc *corev1.Service, node string, st status.Service, want map[string]bool, hitHere bool) Step {
	step := Step{Name: "node/" + node, Status: StatusOK}
	if !st.Programmed {
		step.Status, step.Message = StatusBroken, fmt.Sprintf("the proxy on %s (%s) has no rules for this Service", node, st.Mode)
		return step
	}
	have := map[string]bool{}
	for _, ep := range st.Endpoints {
		if ep.Ready {
			have[ep.Address] = true
		}
	}
	var stale, missing []string
	for a := range have {
		if !want[a] {
			stale = append(stale, a)
		}
	}
	for a := range want {
		if !have[a] {
			missing = append(missing, a)
		}
	}
	slices.Sort(stale)
	slices.Sort(missing)
	step.Evidence = append(step.Evidence, proxyEvidence(st)...)
	switch {
	case len(stale) > 0 || len(missing) > 0:
		step.Status = StatusBroken
		if st.Pending {
			step.Status = StatusWarning
		}
		var parts []string
		if len(stale) > 0 {
			parts = append(parts, "still routes to "+strings.Join(firstN(stale, 5), ", ")+", no longer ready endpoints")
		}
		if len(missing) > 0 {
			parts = append(parts, "does not route to "+strings.Join(firstN(missing, 5), ", "))
		}
		step.Message = fmt.Sprintf("the proxy on %s %s", node, strings.Join(parts, " and "))
		if st.Pending {
			step.Message += " (a newer change is waiting to be programmed)"
		}
	case st.ExternalPolicyLocal && st.LocalReady == 0:
		step.Status = StatusWarning
		if hitHere {
			step.Status = StatusBroken
		}
		step.Message = fmt.Sprintf("externalTrafficPolicy Local and %s has no local ready endpoint: external traffic arriving at %s is dropped", node, node)
	default:
		step.Message = fmt.Sprintf("the proxy (%s) routes to %d ready endpoint(s)", st.Mode, len(have))
		if !st.ProgrammedAt.IsZero() {
			step.Message += ", programmed " + st.ProgrammedAt.UTC().Format(time.RFC3339)
		}
	}
	return step
}

func proxyEvidence(st status.Service) []string {
	var out []string
	var names []string
	for n := range st.SliceVersions {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out = append(out, fmt.Sprintf("slice %s at resourceVersion %s received", n, st.SliceVersions[n]))
	}
	for _, ep := range st.Endpoints {
		out = append(out, fmt.Sprintf("programmed %s %s ready=%t serving=%t terminating=%t node=%s", ep.Port, ep.Address, ep.Ready, ep.Serving, ep.Terminating, ep.Node))
	}
	return firstN(out, 12)
}

// latencyIncludes says what a programming latency figure counts.
const latencyIncludes = "(from the pod's change to the node's rules: the EndpointSlice update, its watch, the proxy's --min-sync-period between syncs and the write)"

// latencyStep reports how long the last endpoint change took to reach the
// nodes: from the newest slice trigger time (when the pod changed) to each
// proxy's programming, as kube-proxy's network programming latency is
// measured. The figure is end to end, so the message says what it
// includes: the EndpointSlice update, the watch that carries it, the
// proxy's wait between syncs (--min-sync-period, when changes come in
// bursts) and the rules' write.
//
// A node whose rules already match the slices but were written before
// the newest trigger time needed no change for it (the change touched
// nothing the proxy programs): it counts as reached.
func latencyStep(in Objects, stats []*status.Service, current []bool) (Step, bool) {
	var trigger time.Time
	for _, s := range in.Slices {
		if t, err := time.Parse(time.RFC3339Nano, s.Annotations[corev1.EndpointsLastChangeTriggerTime]); err == nil && t.After(trigger) {
			trigger = t
		}
	}
	if trigger.IsZero() {
		return Step{}, false
	}
	st := Step{Name: "latency", Status: StatusOK}
	var slowest time.Duration
	var slowNode string
	reached, asked := 0, 0
	var late []string
	for i, s := range stats {
		if s == nil {
			continue
		}
		asked++
		if s.ProgrammedAt.Before(trigger) {
			if current[i] {
				reached++
				st.Evidence = append(st.Evidence, s.Node+": up to date, its rules did not need to change")
			} else {
				late = append(late, s.Node)
			}
			continue
		}
		reached++
		if s.TriggerTime.IsZero() {
			// Programmed by a proxy that started after the change: how
			// late that was says nothing about programming.
			st.Evidence = append(st.Evidence, s.Node+": programmed when its proxy started")
			continue
		}
		d := s.ProgrammedAt.Sub(trigger)
		st.Evidence = append(st.Evidence, fmt.Sprintf("%s: %s", s.Node, d.Round(time.Millisecond)))
		if d > slowest {
			slowest, slowNode = d, s.Node
		}
	}
	if asked == 0 {
		return Step{}, false
	}
	st.Message = fmt.Sprintf("the last change (%s) reached %d of %d node(s) asked", trigger.UTC().Format(time.RFC3339), reached, asked)
	if slowNode != "" {
		st.Message += fmt.Sprintf(", slowest %s in %s %s", slowNode, slowest.Round(time.Millisecond), latencyIncludes)
	}
	if len(late) > 0 {
		st.Status = StatusWarning
		st.Message += "; not yet programmed on " + strings.Join(firstN(late, 5), ", ")
	}
	return st, true
}
