package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// streamVerb is one of the pod subresources that stream through the
// pod's agent: exec, attach or portforward.
type streamVerb string

const (
	verbExec        streamVerb = "exec"
	verbAttach      streamVerb = "attach"
	verbPortForward streamVerb = "portforward"
)

// StreamREST serves pods/exec, pods/attach and pods/portforward as
// kube-apiserver does for a kubelet: it finds the pod's agent and proxies
// the upgraded connection to it. Port-forward is passed through whatever
// the protocol (SPDY, or SPDY tunnelled through a WebSocket, which the
// agent accepts as it is). For exec and attach, kubectl's WebSocket
// protocol v5.channel.k8s.io is terminated here and spoken to the agent as
// SPDY through the stream translator; SPDY is passed through.
type StreamREST struct {
	pods, nodes *REST
	transport   http.RoundTripper
	verb        streamVerb
	// authz, when set, must also allow create on the subresource for a
	// GET (a WebSocket upgrade), as kube-apiserver does since 1.35:
	// otherwise a "read-only" get on pods/exec would run commands.
	authz authorizer.Authorizer
}

// AddStreamingSubresources adds pods/exec, pods/attach, pods/portforward
// and nodes/proxy to core, the core group's storage, which holds pods and
// nodes; transport carries the API server's client certificate to the
// agents. authz, if not nil, is asked for create on the pod subresource
// when a session is opened with GET.
func AddStreamingSubresources(core map[string]rest.Storage, transport http.RoundTripper, authz authorizer.Authorizer) {
	pods, nodes := core["pods"].(*REST), core["nodes"].(*REST)
	for _, s := range []*StreamREST{NewExecREST(pods, nodes, transport), NewAttachREST(pods, nodes, transport),
		NewPortForwardREST(pods, nodes, transport)} {
		s.authz = authz
		core["pods/"+string(s.verb)] = s
	}
	core["nodes/proxy"] = NewNodeProxyREST(nodes, transport)
}

// NewExecREST returns pods/exec; transport carries the API server's client
// certificate to the agents.
func NewExecREST(pods, nodes *REST, transport http.RoundTripper) *StreamREST {
	return &StreamREST{pods: pods, nodes: nodes, transport: transport, verb: verbExec}
}

// NewAttachREST returns pods/attach.
func NewAttachREST(pods, nodes *REST, transport http.RoundTripper) *StreamREST {
	return &StreamREST{pods: pods, nodes: nodes, transport: transport, verb: verbAttach}
}

// NewPortForwardREST returns pods/portforward.
func NewPortForwardREST(pods, nodes *REST, transport http.RoundTripper) *StreamREST {
	return &StreamREST{pods: pods, nodes: nodes, transport: transport, verb: verbPortForward}
}

var _ rest.Connecter = &StreamREST{}

// New returns the subresource's options object, as upstream does.
func (r *StreamREST) New() runtime.Object {
	obj, _, _ := r.NewConnectOptions()
	return obj
}

// Destroy is a no-op: the pod store owns the storage.
func (r *StreamREST) Destroy() {}

// ConnectMethods are GET and POST: browsers open WebSockets with GET,
// kubectl's SPDY client posts.
func (r *StreamREST) ConnectMethods() []string { return []string{"GET", "POST"} }

// NewConnectOptions returns the query parameters the verb takes.
func (r *StreamREST) NewConnectOptions() (runtime.Object, bool, string) {
	switch r.verb {
	case verbExec:
		return &corev1.PodExecOptions{}, false, ""
	case verbAttach:
		return &corev1.PodAttachOptions{}, false, ""
	}
	return &corev1.PodPortForwardOptions{}, false, ""
}

// Connect returns the handler that proxies one session to the pod's agent.
func (r *StreamREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	if err := r.authorizeCreate(ctx, name); err != nil {
		return nil, err
	}
	loc, streams, err := r.location(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	upgrade := proxy.NewUpgradeAwareHandler(loc, r.transport, false, true, proxy.NewErrorResponder(responder))
	if r.verb == verbPortForward {
		// The agent speaks both of kubectl's port-forward protocols, SPDY
		// and SPDY tunnelled through a WebSocket, so either upgrade is
		// passed through byte for byte: no decoding and framing again here.
		return upgrade, nil
	}
	return translator.NewTranslatingHandler(upgrade, translator.NewStreamTranslatorHandler(loc, r.transport, 0, streams),
		wsstream.IsWebSocketRequestWithStreamCloseProtocol), nil
}

// authorizeCreate refuses a session opened with any verb but create (a
// WebSocket's GET) unless the requester may also create the subresource,
// with the API's usual forbidden message. SPDY's POST is a create already
// and was authorized as one.
func (r *StreamREST) authorizeCreate(ctx context.Context, name string) error {
	info, ok := genericrequest.RequestInfoFrom(ctx)
	if r.authz == nil || !ok || info.Verb == "create" {
		return nil
	}
	u, ok := genericrequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewUnauthorized("no user")
	}
	attrs := authorizer.AttributesRecord{User: u, Verb: "create", Namespace: info.Namespace, APIGroup: info.APIGroup,
		APIVersion: info.APIVersion, Resource: "pods", Subresource: string(r.verb), Name: name, ResourceRequest: true}
	d, reason, err := r.authz.Authorize(ctx, attrs)
	if d == authorizer.DecisionAllow {
		return nil
	}
	msg := fmt.Sprintf("User %q cannot create resource %q in API group %q in the namespace %q",
		u.GetName(), "pods/"+string(r.verb), info.APIGroup, info.Namespace)
	if reason != "" {
		msg += ": " + reason
	} else if err != nil {
		msg += ": " + err.Error()
	}
	return apierrors.NewForbidden(corev1.Resource("pods"), name, errors.New(msg))
}

// location is the agent's URL for the session and the streams it asks
// for.
func (r *StreamREST) location(ctx context.Context, name string, opts runtime.Object) (*url.URL, translator.Options, error) {
	pod, host, err := r.podAgent(ctx, name)
	if err != nil {
		return nil, translator.Options{}, err
	}
	return streamLocation(pod, host, opts)
}

// streamLocation is the URL on the agent at host for a session with pod,
// after the checks kube-apiserver makes: exec has a command, exec and
// attach at least one stream, the container is the pod's (or the pod has
// only one). The agent's paths and query are kubelet's.
func streamLocation(pod *corev1.Pod, host string, opts runtime.Object) (*url.URL, translator.Options, error) {
	var container string
	var streams translator.Options
	q := url.Values{}
	verb := verbPortForward
	switch o := opts.(type) {
	case *corev1.PodExecOptions:
		if len(o.Command) == 0 {
			return nil, streams, apierrors.NewBadRequest("you must specify at least 1 command")
		}
		verb, container = verbExec, o.Container
		streams = translator.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}
		q["command"] = o.Command
	case *corev1.PodAttachOptions:
		verb, container = verbAttach, o.Container
		streams = translator.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}
	case *corev1.PodPortForwardOptions:
		for _, p := range o.Ports {
			q.Add("port", strconv.Itoa(int(p)))
		}
		return &url.URL{Scheme: "https", Host: host, Path: "/portForward/" + pod.Namespace + "/" + pod.Name, RawQuery: q.Encode()}, streams, nil
	default:
		return nil, streams, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", opts))
	}
	if !streams.Stdin && !streams.Stdout && !streams.Stderr {
		return nil, streams, apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr")
	}
	for k, on := range map[string]bool{"input": streams.Stdin, "output": streams.Stdout, "error": streams.Stderr, "tty": streams.Tty} {
		if on {
			q.Set(k, "1")
		}
	}
	container, err := logContainer(pod, container)
	if err != nil {
		return nil, streams, err
	}
	p := "/" + string(verb) + "/" + pod.Namespace + "/" + pod.Name + "/" + container
	return &url.URL{Scheme: "https", Host: host, Path: p, RawQuery: q.Encode()}, streams, nil
}

// podAgent returns the named pod and the address of its node's agent.
func (r *StreamREST) podAgent(ctx context.Context, name string) (*corev1.Pod, string, error) {
	obj, err := r.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName == "" {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", name))
	}
	host, err := nodeAgent(ctx, r.nodes, pod.Spec.NodeName)
	return pod, host, err
}

// nodeAgent is host:port of the named node's agent.
func nodeAgent(ctx context.Context, nodes *REST, name string) (string, error) {
	obj, err := nodes.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	host, err := AgentAddress(obj.(*corev1.Node))
	if err != nil {
		return "", apierrors.NewBadRequest(err.Error())
	}
	return host, nil
}

// NodeProxyREST serves nodes/proxy: a request under it goes to the node's
// agent, for diagnostics, with the API server's client certificate. The
// agent's pod sessions (exec, attach, port-forward, run) are refused
// here: through nodes/proxy they would skip the pods/exec authorization,
// so a get on nodes/proxy would run commands in every pod of the node.
type NodeProxyREST struct {
	nodes     *REST
	transport http.RoundTripper
}

// NewNodeProxyREST returns nodes/proxy.
func NewNodeProxyREST(nodes *REST, transport http.RoundTripper) *NodeProxyREST {
	return &NodeProxyREST{nodes: nodes, transport: transport}
}

var _ rest.Connecter = &NodeProxyREST{}

// New returns NodeProxyOptions, as upstream does.
func (r *NodeProxyREST) New() runtime.Object { return &corev1.NodeProxyOptions{} }

// Destroy is a no-op: the node store owns the storage.
func (r *NodeProxyREST) Destroy() {}

// ConnectMethods are the methods proxied.
func (r *NodeProxyREST) ConnectMethods() []string {
	return []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}
}

// NewConnectOptions says the rest of the URL is the path on the agent.
func (r *NodeProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.NodeProxyOptions{}, true, "path"
}

// Connect returns a handler that proxies to the node's agent.
func (r *NodeProxyREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*corev1.NodeProxyOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", opts))
	}
	p := path.Join("/", o.Path)
	if strings.HasSuffix(o.Path, "/") && p != "/" {
		p += "/"
	}
	if streamingAgentPath(p) {
		return nil, apierrors.NewForbidden(corev1.Resource("nodes"), name, fmt.Errorf(
			"%s is a pod session on the agent and is not served through nodes/proxy; use the pod's exec, attach or portforward subresource", p))
	}
	host, err := nodeAgent(ctx, r.nodes, name)
	if err != nil {
		return nil, err
	}
	loc := &url.URL{Scheme: "https", Host: host, Path: p}
	h := proxy.NewUpgradeAwareHandler(loc, r.transport, true, false, proxy.NewErrorResponder(responder))
	return h, nil
}

// streamingAgentPaths are the first path segments of the agent's pod
// sessions, kubelet's names.
var streamingAgentPaths = []string{"exec", "attach", "portforward", "run"}

// streamingAgentPath says whether p, a cleaned path on the agent, opens a
// pod session. Case is ignored so that no spelling slips past.
func streamingAgentPath(p string) bool {
	first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	for _, s := range streamingAgentPaths {
		if strings.EqualFold(first, s) {
			return true
		}
	}
	return false
}
