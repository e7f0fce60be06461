package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/agent/dialcheck"
	"portal.dev/portal/proxy/status"
)

// NodeAsker asks a node's agent the two questions explain needs of a node.
type NodeAsker interface {
	// Dial asks node's agent whether anything listens on address
	// (IP:PORT) over protocol, dialing from the node.
	Dial(ctx context.Context, node, address, protocol string) (dialcheck.Result, error)
	// ProxyStatus asks node's agent what the node's proxy programmed for
	// the Service nn.
	ProxyStatus(ctx context.Context, node string, nn types.NamespacedName) (status.Service, error)
}

// ErrProxyDown is returned by ProxyStatus when the node's agent answered
// but its service proxy did not.
var ErrProxyDown = errors.New("the service proxy does not answer")

// nodeProxy asks through the API server's nodes/NAME/proxy subresource,
// as kubectl get --raw would: the caller's own credentials decide.
type nodeProxy struct {
	client kubernetes.Interface
}

// NewNodeProxy returns a NodeAsker that reaches the agents through the API
// server's nodes/NAME/proxy subresource with client's credentials.
func NewNodeProxy(client kubernetes.Interface) NodeAsker { return nodeProxy{client} }

func (n nodeProxy) get(ctx context.Context, node, path string, params map[string]string, into any) error {
	req := n.client.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource("proxy").Suffix(path)
	for k, v := range params {
		req = req.Param(k, v)
	}
	res := req.Do(ctx)
	raw, err := res.Raw()
	if err != nil {
		var code int
		res.StatusCode(&code)
		if code == 502 && strings.Contains(string(raw), "service proxy") {
			return fmt.Errorf("%w: %s", ErrProxyDown, strings.TrimSpace(string(raw)))
		}
		return err
	}
	return json.Unmarshal(raw, into)
}

func (n nodeProxy) Dial(ctx context.Context, node, address, protocol string) (dialcheck.Result, error) {
	var r dialcheck.Result
	err := n.get(ctx, node, "dial", map[string]string{"address": address, "protocol": protocol}, &r)
	return r, err
}

func (n nodeProxy) ProxyStatus(ctx context.Context, node string, nn types.NamespacedName) (status.Service, error) {
	var s status.Service
	err := n.get(ctx, node, "proxystatus/services/"+nn.Namespace+"/"+nn.Name, nil, &s)
	return s, err
}

// askError describes a failed question to a node in one line, and whether
// it was for want of permission.
func askError(node string, err error) (string, Status) {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("no permission to get nodes/proxy of %s (needed to ask its agent): %s", node, clean(err.Error())), StatusWarning
	case errors.Is(err, ErrProxyDown):
		return clean(err.Error()), StatusBroken
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline"):
		return fmt.Sprintf("node %s does not answer (no reply in time); going on without it", node), StatusWarning
	}
	return fmt.Sprintf("node %s does not answer: %s; going on without it", node, clean(err.Error())), StatusWarning
}
