// Command ingress is the API side of bench/ingress/run.sh: it writes the
// objects Portal's ingress serves during the throughput runs (setup), and
// measures the ingress at scale (scale): with 1,000 Ingresses of 2 paths
// each, the time from an Ingress change, and from an endpoint change, to
// the first request served by the new rule, and the process's RSS. Its
// floor command is the least proxy Go allows, an anchor for the throughput
// runs (floor.go).
//
// run.sh runs it inside the benchmark's network namespace, next to the
// `portal apiserver` it starts there.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// className is the IngressClass the benchmark's Ingresses name; the
// ingress serves it by default.
const className = "portal"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench-ingress setup|scale|floor [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "setup":
		err = setup(os.Args[2:])
	case "scale":
		err = scale(os.Args[2:])
	case "floor":
		err = runFloor(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-ingress:", err)
		os.Exit(1)
	}
}

// newClient returns a client for the kubeconfig, with a rate limit high
// enough that filling 1,000 Ingresses is bound by the server.
func newClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 5000, 5000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	return kubernetes.NewForConfig(cfg)
}

// setup writes the throughput runs' objects: the IngressClass, the TLS
// Secret of the default certificate, Service web with one endpoint (the
// backend) and Ingress web routing every host's / to it.
func setup(args []string) error {
	fs := flag.NewFlagSet("setup", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server")
	backend := fs.String("backend", "10.244.0.10:8080", "the backend's address:port")
	certFile := fs.String("cert", "", "PEM certificate of the default TLS Secret")
	keyFile := fs.String("key", "", "PEM key of the default TLS Secret")
	fs.Parse(args)
	client, err := newClient(*kubeconfig)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := ensureClass(ctx, client); err != nil {
		return err
	}
	cert, err := os.ReadFile(*certFile)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(*keyFile)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-tls", Namespace: "default"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	}
	if _, err := client.CoreV1().Secrets("default").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Secret bench-tls: %w", err)
	}
	ip, port, err := splitAddr(*backend)
	if err != nil {
		return err
	}
	if err := createService(ctx, client, "default", "web", ip, port); err != nil {
		return err
	}
	ing := newIngress("default", "web", "", "web", pathRule("/", networkingv1.PathTypePrefix))
	if _, err := client.NetworkingV1().Ingresses("default").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Ingress web: %w", err)
	}
	return nil
}

// ensureClass creates IngressClass portal for Portal's controller unless
// the server made it already.
func ensureClass(ctx context.Context, client kubernetes.Interface) error {
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: className},
		Spec:       networkingv1.IngressClassSpec{Controller: "portal.dev/ingress"},
	}
	_, err := client.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create IngressClass %s: %w", className, err)
	}
	return nil
}

// createService creates selector-less Service name (port 80, "http") and
// its EndpointSlice name-1 with one ready endpoint ip:port, as the
// EndpointSlice controller would write it for one ready pod.
func createService(ctx context.Context, client kubernetes.Interface, ns, name, ip string, port int32) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(port),
		}}},
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Service %s/%s: %w", ns, name, err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice(ns, name, ip, port), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create EndpointSlice %s/%s-1: %w", ns, name, err)
	}
	return nil
}

// slice is Service name's EndpointSlice with one ready endpoint.
func slice(ns, name, ip string, port int32) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-1", Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "bench-ingress"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
	}
}

// pathRule is one path of an Ingress rule; newIngress fills in the backend.
func pathRule(path string, pathType networkingv1.PathType) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: path, PathType: ptr.To(pathType)}
}

// newIngress is Ingress ns/name of class portal with one rule for host (""
// for every host) whose paths all go to Service svc, port "http".
func newIngress(ns, name, host, svc string, paths ...networkingv1.HTTPIngressPath) *networkingv1.Ingress {
	for i := range paths {
		paths[i].Backend = serviceBackend(svc)
	}
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(className),
			Rules: []networkingv1.IngressRule{{
				Host:             host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}},
			}},
		},
	}
}

func serviceBackend(svc string) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
		Name: svc, Port: networkingv1.ServiceBackendPort{Name: "http"},
	}}
}
