package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/agent/dialcheck"
	"portal.dev/portal/agent/httpprobe"
	"portal.dev/portal/proxy/status"
)

// NodeAsker asks a node's agent the questions explain needs of a node.
type NodeAsker interface {
	// Dial asks node's agent whether anything listens on address
	// (IP:PORT) over protocol, dialing from the node.
	Dial(ctx context.Context, node, address, protocol string) (dialcheck.Result, error)
	// ProxyStatus asks node's agent what the node's proxy programmed for
	// the Service nn.
	ProxyStatus(ctx context.Context, node string, nn types.NamespacedName) (status.Service, error)
	// HTTPProbe asks node's agent to send req through the node's Ingress
	// controller; ErrNoIngress when the node runs none for req's scheme.
	HTTPProbe(ctx context.Context, node string, req httpprobe.Request) (httpprobe.Result, error)
}

// ErrProxyDown is returned by ProxyStatus when the node's agent answered
// but its service proxy did not.
var ErrProxyDown = errors.New("the service proxy does not answer")

// proxyDownText starts the agent's answer when its node's proxy does not
// answer (agent/diag.go).
const proxyDownText = "the service proxy of node "

// nodeProxy asks through the API server's nodes/NAME/proxy subresource,
// as kubectl get --raw would: the caller's own credentials decide.
type nodeProxy struct {
	client kubernetes.Interface
}

// NewNodeProxy returns a NodeAsker that reaches the agents through the API
// server's nodes/NAME/proxy subresource with client's credentials.
func NewNodeProxy(client kubernetes.Interface) NodeAsker { return nodeProxy{client} }

// get asks node's agent for path and decodes its JSON answer into into.
func (n nodeProxy) get(ctx context.Context, node, path string, params map[string]string, into any) error {
	req := n.client.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource("proxy").Suffix(path)
	for k, v := range params {
		req = req.Param(k, v)
	}
	raw, err := req.Do(ctx).Raw()
	if err != nil {
		// The agent says so when it reached no proxy (a 502 whose body
		// client-go folds into the error's text).
		text := err.Error() + " " + string(raw) + " " + causes(err)
		if i := strings.Index(text, proxyDownText); i >= 0 {
			msg, _, _ := strings.Cut(text[i:], `")`)
			return fmt.Errorf("%w: %s", ErrProxyDown, strings.ReplaceAll(msg, `\"`, `"`))
		}
		if i := strings.Index(text, noIngressText); i >= 0 {
			msg, _, _ := strings.Cut(text[i:], "\n")
			return fmt.Errorf("%w: %s", ErrNoIngress, strings.TrimSpace(msg))
		}
		return err
	}
	return json.Unmarshal(raw, into)
}

// Dial asks node's agent to dial address over protocol (its /dial).
func (n nodeProxy) Dial(ctx context.Context, node, address, protocol string) (dialcheck.Result, error) {
	var r dialcheck.Result
	err := n.get(ctx, node, "dial", map[string]string{"address": address, "protocol": protocol}, &r)
	return r, err
}

// ProxyStatus asks node's agent for its proxy's account of nn.
func (n nodeProxy) ProxyStatus(ctx context.Context, node string, nn types.NamespacedName) (status.Service, error) {
	var s status.Service
	err := n.get(ctx, node, "proxystatus/services/"+nn.Namespace+"/"+nn.Name, nil, &s)
	return s, err
}

// HTTPProbe asks node's agent to send req through its Ingress controller
// (its /httpprobe).
func (n nodeProxy) HTTPProbe(ctx context.Context, node string, req httpprobe.Request) (httpprobe.Result, error) {
	var r httpprobe.Result
	err := n.get(ctx, node, "httpprobe", map[string]string{"scheme": req.Scheme, "host": req.Host, "path": req.Path}, &r)
	return r, err
}

// causes are the messages of an API error's causes, where client-go keeps
// the body of an answer that was not a Status (the agent's plain text).
func causes(err error) string {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil {
		return ""
	}
	var out []string
	for _, c := range st.Status().Details.Causes {
		out = append(out, c.Message)
	}
	return strings.Join(out, " ")
}

// dnsAnswer is the agent's /dnsquery answer (agent.DNSAnswer).
type dnsAnswer struct {
	Server  string `json:"server"`
	Message []byte `json:"message"`
}

// DNSQuery asks node's agent to ask the cluster DNS, from the node, for
// name's records of qtype.
func (n nodeProxy) DNSQuery(ctx context.Context, node, name string, qtype uint16) (*dns.Msg, string, error) {
	var a dnsAnswer
	if err := n.get(ctx, node, "dnsquery", map[string]string{"name": name, "type": strconv.Itoa(int(qtype))}, &a); err != nil {
		return nil, "", err
	}
	m := new(dns.Msg)
	if err := m.Unpack(a.Message); err != nil {
		return nil, "", fmt.Errorf("the answer relayed by node %s: %w", node, err)
	}
	return m, a.Server, nil
}

// askError describes a failed question to a node in one line, and whether
// it was for want of permission.
func askError(node string, err error) (string, Status) {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("no permission to get nodes/proxy of %s (needed to ask its agent): %s", node, clean(err.Error())), StatusWarning
	case errors.Is(err, ErrProxyDown):
		_, why, _ := strings.Cut(err.Error(), ": ")
		return clean(why) + "; its rules stay as it last wrote them, whatever changed since", StatusBroken
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline"):
		return fmt.Sprintf("node %s does not answer (no reply in time); going on without it", node), StatusWarning
	}
	return fmt.Sprintf("node %s does not answer: %s; going on without it", node, clean(err.Error())), StatusWarning
}
