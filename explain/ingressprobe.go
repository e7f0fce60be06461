package explain

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"portal.dev/portal/agent/httpprobe"
)

// Answer is what the Ingress controller answered to the one request
// explain sent for a rule of an Ingress, through a node's agent.
type Answer struct {
	// Rule is the rule asked about: "host/path" or "default backend".
	Rule string `json:"rule"`
	// Node is the node whose agent sent the request; "" when none could.
	Node string `json:"node,omitempty"`
	// Verdict and Message judge the answer (see judgeAnswer).
	Verdict Status `json:"verdict"`
	Message string `json:"message"`
	// Result is the agent's account of the request and the answer.
	Result *httpprobe.Result `json:"result,omitempty"`
}

// ErrNoIngress is returned by HTTPProbe when the node's agent answered
// but knows no Ingress controller on its node for the scheme asked.
var ErrNoIngress = errors.New("no Ingress controller on the node")

// noIngressText starts the agent's answer when its node has no Ingress
// controller for the scheme asked (agent/diag.go).
const noIngressText = "no Ingress controller known on node "

// noRuleText is the body the Ingress controller answers a request no rule
// matches with (ingress/handler.go); any other 404 is the backend's own.
const noRuleText = "no Ingress rule matches this host and path"

// maxIngressProbes bounds the requests sent through the Ingress
// controller for one explain, so that an Ingress of many rules still
// answers within a second.
const maxIngressProbes = 10

// evidenceBody is how much of an answer's body its evidence line shows.
const evidenceBody = 80

// maxIngressNodes bounds the nodes tried, in turn, to find one whose agent
// knows an Ingress controller.
const maxIngressNodes = 3

// probeRequest is the request sent for rule r of ing: the rule's host
// (a wildcard's first label made up), its path when that can be sent as
// it is, and HTTPS when the Ingress lists the host under spec.tls.
func probeRequest(ing *networkingv1.Ingress, r backendRef) httpprobe.Request {
	req := httpprobe.Request{Scheme: httpprobe.HTTP, Host: r.host, Path: r.path}
	if suffix, ok := strings.CutPrefix(req.Host, "*."); ok {
		req.Host = "portal-explain." + suffix
	}
	if req.Path == "" || (httpprobe.Request{Scheme: req.Scheme, Path: req.Path}).Validate() != nil {
		req.Path = "/"
	}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			if req.Host != "" && (h == req.Host || hostMatches(h, req.Host)) {
				req.Scheme = httpprobe.HTTPS
			}
		}
	}
	return req
}

// serviceIngressAnswers asks the Ingress controller what it answers for
// the rules of the Ingresses of in that send traffic to svc, all the
// Ingresses at once, by "NS/NAME" of the Ingress.
func (e *Explainer) serviceIngressAnswers(ctx context.Context, svc *corev1.Service, in Objects) map[string][]Answer {
	out := map[string][]Answer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	budget := maxIngressProbes
	for _, ing := range in.Ingresses {
		if ing.Namespace != svc.Namespace || budget <= 0 {
			continue
		}
		var refs []backendRef
		for _, b := range ingressBackends(ing) {
			if b.backend.Name == svc.Name && len(refs) < budget {
				refs = append(refs, b)
			}
		}
		if len(refs) == 0 {
			continue
		}
		budget -= len(refs)
		wg.Go(func() {
			answers := e.ingressAnswers(ctx, ing, refs, in.Nodes)
			mu.Lock()
			defer mu.Unlock()
			out[ing.Namespace+"/"+ing.Name] = answers
		})
	}
	wg.Wait()
	return out
}

// ingressNodes are the nodes to ask, in order: those whose addresses the
// Ingress status publishes (where its controller listens), then the other
// Ready nodes, as portal server runs a controller beside its agent.
func ingressNodes(ing *networkingv1.Ingress, nodes []*corev1.Node) []string {
	published := map[string]bool{}
	for _, in := range ing.Status.LoadBalancer.Ingress {
		published[in.IP] = true
		published[in.Hostname] = true
	}
	var first, rest []string
	for _, n := range nodes {
		if !nodeReady(n) {
			continue
		}
		hit := false
		for _, a := range n.Status.Addresses {
			hit = hit || (a.Address != "" && published[a.Address])
		}
		if hit {
			first = append(first, n.Name)
		} else {
			rest = append(rest, n.Name)
		}
	}
	sort.Strings(first)
	sort.Strings(rest)
	return append(first, rest...)
}

// ingressAnswers sends one request per rule of ing in refs through the
// Ingress controller, from the first candidate node whose agent knows
// one, and judges each answer. It returns nil when no request could be
// sent for a reason that says nothing of the Ingress (no node to ask).
func (e *Explainer) ingressAnswers(ctx context.Context, ing *networkingv1.Ingress, refs []backendRef, nodes []*corev1.Node) []Answer {
	candidates := ingressNodes(ing, nodes)
	if len(refs) == 0 || len(candidates) == 0 {
		return nil
	}
	out := make([]Answer, len(refs))
	node, first := e.findIngressNode(ctx, ing, refs[0], candidates[:min(len(candidates), maxIngressNodes)])
	out[0] = first
	if node == "" {
		for i := 1; i < len(refs); i++ {
			out[i] = Answer{Rule: refs[i].where, Verdict: first.Verdict, Message: first.Message}
		}
		return out
	}
	var wg sync.WaitGroup
	for i := 1; i < len(refs); i++ {
		wg.Go(func() { out[i] = e.askIngress(ctx, node, ing, refs[i]) })
	}
	wg.Wait()
	return out
}

// findIngressNode asks candidates in turn for r until one's agent knows
// an Ingress controller, and returns that node ("" when none does) and
// the answer.
func (e *Explainer) findIngressNode(ctx context.Context, ing *networkingv1.Ingress, r backendRef, candidates []string) (string, Answer) {
	var misses []string
	none := true // no node asked runs a controller: not the Ingress's fault
	for _, node := range candidates {
		a := e.askIngress(ctx, node, ing, r)
		if a.Result != nil {
			return node, a
		}
		misses = append(misses, a.Message)
		none = none && a.Verdict == StatusOK
		if strings.HasPrefix(a.Message, "no permission") {
			break // the same on every node
		}
	}
	if none {
		return "", Answer{Rule: r.where, Verdict: StatusOK,
			Message: "no request sent: no node asked (" + strings.Join(candidates, ", ") + ") runs an Ingress controller"}
	}
	return "", Answer{Rule: r.where, Verdict: StatusWarning,
		Message: "could not send a request through the Ingress controller: " + strings.Join(firstN(misses, 3), "; ")}
}

// askIngress sends r's request from node and judges the answer; an
// Answer without Result is a question the node did not answer.
func (e *Explainer) askIngress(ctx context.Context, node string, ing *networkingv1.Ingress, r backendRef) Answer {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.NodeTimeout)
	defer cancel()
	req := probeRequest(ing, r)
	res, err := e.cfg.Nodes.HTTPProbe(ctx, node, req)
	a := Answer{Rule: r.where, Node: node}
	switch {
	case errors.Is(err, ErrNoIngress):
		a.Verdict, a.Message = StatusOK, fmt.Sprintf("node %s runs no Ingress controller for %s", node, req.Scheme)
	case apierrors.IsForbidden(err):
		a.Verdict, a.Message = StatusWarning, fmt.Sprintf("no permission to get nodes/proxy of %s (needed to send a request through its Ingress controller)", node)
	case err != nil:
		a.Message, a.Verdict = askError(node, err)
	default:
		a.Result = &res
		a.Verdict, a.Message = judgeAnswer(r.where, node, res)
	}
	return a
}

// judgeAnswer classifies what the Ingress controller answered for rule:
// a 2xx, or a 3xx (the redirect to HTTPS of a TLS host, or the backend's
// own), reaches the Service; a 404 is the backend's own answer unless the
// controller says no rule matched, which, as any other 4xx, is a warning;
// 502, 503, 504 or no answer at all mean the rule does not reach the
// Service. Other 5xx are the backend's own failures, a warning.
func judgeAnswer(rule, node string, res httpprobe.Result) (Status, string) {
	code := res.Status
	sent := clean(fmt.Sprintf("%s (GET %s://%s%s from %s)", rule, res.Scheme, orAddress(res.Host, res.Address), res.Path, node))
	answered := fmt.Sprintf("%s answers %d %s in %dms", sent, code, http.StatusText(code), res.Millis)
	body := clean(strings.TrimSpace(res.Body))
	switch {
	case code == 0:
		return StatusBroken, fmt.Sprintf("%s: no answer from the Ingress controller at %s: %s", sent, clean(res.Address), clean(res.Error))
	case code >= 200 && code < 300:
		return StatusOK, answered
	case code >= 300 && code < 400 && res.Scheme == httpprobe.HTTP && strings.HasPrefix(res.Location, "https://"):
		return StatusOK, answered + ", the redirect to HTTPS"
	case code >= 300 && code < 400:
		return StatusOK, answered + ", a redirect to " + clean(res.Location)
	case code == http.StatusNotFound && strings.Contains(res.Body, noRuleText):
		return StatusWarning, answered + ": the controller has no rule for this host and path (an Ingress of another class, or not loaded yet)"
	case code == http.StatusNotFound:
		return StatusOK, answered + " from the backend: the rule reaches it, and it has no page at " + clean(res.Path)
	case code >= 400 && code < 500:
		return StatusWarning, answered + withBody(body)
	case code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		return StatusBroken, answered + withBody(body)
	}
	return StatusWarning, answered + withBody(body)
}

func orAddress(host, address string) string {
	if host == "" {
		return address
	}
	return host
}

func withBody(body string) string {
	if body == "" {
		return ""
	}
	return ": " + body
}

// answerEvidence is the evidence line of one answer.
func answerEvidence(a Answer) string {
	if a.Result == nil || a.Result.Status == 0 {
		return ""
	}
	line := fmt.Sprintf("%s: %d from %s via %s", a.Rule, a.Result.Status, clean(a.Result.Address), a.Node)
	if a.Result.Location != "" {
		line += ", Location " + clean(a.Result.Location)
	}
	if b := strings.TrimSpace(a.Result.Body); b != "" {
		// The first line's worth: the whole of it is in -o json.
		if len(b) > evidenceBody {
			b = strings.ToValidUTF8(b[:evidenceBody], "") + "..."
		}
		line += ", body " + clean(b)
	}
	return line
}

// answersFor returns the answers of answers about rule where.
func answersFor(answers []Answer, where string) []Answer {
	var out []Answer
	for _, a := range answers {
		if a.Rule == where {
			out = append(out, a)
		}
	}
	return out
}
