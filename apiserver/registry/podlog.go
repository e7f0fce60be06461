package registry

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
)

// DefaultAgentPort is where a node agent serves container logs when its
// Node does not say (kubelet's port).
const DefaultAgentPort = 10250

// LogREST serves pods/log: it finds the Pod's node and streams the
// container's log from that node's agent, as kube-apiserver does with a
// kubelet. The agent authenticates the API server by its client
// certificate; like kube-apiserver without --kubelet-certificate-authority,
// the API server does not verify the agent's self-signed serving
// certificate.
type LogREST struct {
	pods, nodes *REST
	transport   http.RoundTripper
}

// NewLogREST returns the log subresource of pods; transport carries the API
// server's client certificate to the agents.
func NewLogREST(pods, nodes *REST, transport http.RoundTripper) *LogREST {
	return &LogREST{pods: pods, nodes: nodes, transport: transport}
}

// New returns an empty Pod: the subresource belongs to pods.
func (r *LogREST) New() runtime.Object { return &corev1.Pod{} }

// Destroy is a no-op: the pod store owns the storage.
func (r *LogREST) Destroy() {}

// ProducesMIMETypes says logs are plain text.
func (r *LogREST) ProducesMIMETypes(verb string) []string { return []string{"text/plain"} }

// ProducesObject says the response is a string, for OpenAPI.
func (r *LogREST) ProducesObject(verb string) any { return "" }

// NewGetOptions returns the query parameters kubectl logs sends.
func (r *LogREST) NewGetOptions() (runtime.Object, bool, string) {
	return &corev1.PodLogOptions{}, false, ""
}

// Get streams the log of one container of the named Pod.
func (r *LogREST) Get(ctx context.Context, name string, opts runtime.Object) (runtime.Object, error) {
	logOpts, ok := opts.(*corev1.PodLogOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", opts))
	}
	if errs := validatePodLogOptions(logOpts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("PodLogOptions").GroupKind(), name, errs)
	}
	obj, err := r.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod := obj.(*corev1.Pod)
	container, err := logContainer(pod, logOpts.Container)
	if err != nil {
		return nil, err
	}
	if pod.Spec.NodeName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", name))
	}
	nodeObj, err := r.nodes.Get(ctx, pod.Spec.NodeName, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	host, err := AgentAddress(nodeObj.(*corev1.Node))
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	loc := &url.URL{Scheme: "https", Host: host,
		Path: fmt.Sprintf("/containerLogs/%s/%s/%s", pod.Namespace, pod.Name, container), RawQuery: logQuery(logOpts).Encode()}
	return &genericrest.LocationStreamer{
		Location:        loc,
		Transport:       r.transport,
		ContentType:     "text/plain",
		Flush:           logOpts.Follow,
		ResponseChecker: genericrest.NewGenericHttpResponseChecker(corev1.Resource("pods/log"), name),
		RedirectChecker: genericrest.PreventRedirects,
	}, nil
}

// logContainer picks the container to read: the one named, or the only
// one; kubectl's message lists the choices otherwise.
func logContainer(pod *corev1.Pod, name string) (string, error) {
	var names []string
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.Name == name {
				return name, nil
			}
			names = append(names, c.Name)
		}
	}
	if name != "" {
		return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
	}
	if len(pod.Spec.Containers) == 1 {
		return pod.Spec.Containers[0].Name, nil
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", pod.Name, names))
}

// AgentAddress is host:port of the Node's agent: its first InternalIP (or
// any address) and the port in status.daemonEndpoints.
func AgentAddress(node *corev1.Node) (string, error) {
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port == 0 {
		port = DefaultAgentPort
	}
	var addr string
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range node.Status.Addresses {
			if a.Type == t && addr == "" {
				addr = a.Address
			}
		}
	}
	if addr == "" {
		return "", fmt.Errorf("node %s has no address to reach its agent", node.Name)
	}
	return net.JoinHostPort(addr, strconv.Itoa(port)), nil
}

// logQuery is the agent's query for o, every option included: the agent
// refuses by name those it cannot honour (timestamps, some since-times).
func logQuery(o *corev1.PodLogOptions) url.Values {
	q := url.Values{}
	if o.Follow {
		q.Set("follow", "true")
	}
	if o.Previous {
		q.Set("previous", "true")
	}
	if o.Timestamps {
		q.Set("timestamps", "true")
	}
	if o.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*o.TailLines, 10))
	}
	if o.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*o.LimitBytes, 10))
	}
	if o.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*o.SinceSeconds, 10))
	}
	if o.SinceTime != nil {
		q.Set("sinceTime", o.SinceTime.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return q
}

// validatePodLogOptions applies upstream's rules to the log query.
func validatePodLogOptions(o *corev1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *o.TailLines, "must be greater than or equal to 0"))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *o.LimitBytes, "must be greater than 0"))
	}
	if o.SinceSeconds != nil && *o.SinceSeconds < 1 {
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *o.SinceSeconds, "must be greater than 0"))
	}
	if o.SinceSeconds != nil && o.SinceTime != nil {
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	}
	return errs
}
