package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/ingress"
	"portal.dev/portal/ingress/route"
)

// serve is Portal's ingress data plane without its watch: it lists the
// objects once, builds the routing Table with package route and serves it
// with package ingress, as `portal ingress` does, plus /debug/pprof on the
// metrics address. run.sh uses it for the throughput runs only while the
// binary has no `portal ingress` command; the change-latency runs need the
// real one.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server")
	o := ingress.DefaultOptions()
	fs.IntVar(&o.HTTPPort, "http-port", 18080, "HTTP port")
	fs.IntVar(&o.HTTPSPort, "https-port", 18443, "HTTPS port")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", "127.0.0.1:10354", "metrics and pprof address")
	fs.StringVar(&o.DefaultSSLCertificate, "default-ssl-certificate", "", "namespace/name of the default certificate's Secret")
	fs.Parse(args)
	client, err := newClient(*kubeconfig)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	src := &listed{services: map[types.NamespacedName]*corev1.Service{}, secrets: map[types.NamespacedName]*corev1.Secret{},
		slices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{}}
	ings, err := src.list(ctx, client)
	if err != nil {
		return err
	}
	res := route.Build(route.Input{Ingresses: ings, Sources: src, Now: time.Now()})
	for _, p := range res.Problems {
		fmt.Printf("problem: %s/%s %s: %s\n", p.Ingress.Namespace, p.Ingress.Name, p.Reason, p.Message)
	}
	var defaultCert *tls.Certificate
	if ns, name, ok := strings.Cut(o.DefaultSSLCertificate, "/"); ok {
		s := src.secrets[types.NamespacedName{Namespace: ns, Name: name}]
		if s == nil {
			return fmt.Errorf("no Secret %s", o.DefaultSSLCertificate)
		}
		c, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return err
		}
		defaultCert = &c
	}
	routes := func() ingress.Routes { return res.Table }
	m := ingress.NewMetrics()
	h := ingress.NewHandler(routes, o, m)
	srv, err := ingress.Listen(o, h, routes, func() *tls.Certificate { return defaultCert })
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	ms := &http.Server{Addr: o.MetricsBindAddress, Handler: mux}
	go ms.ListenAndServe()
	defer ms.Close()
	return srv.Serve(ctx)
}

// listed are the Services, Secrets and EndpointSlices of one listing.
type listed struct {
	services map[types.NamespacedName]*corev1.Service
	secrets  map[types.NamespacedName]*corev1.Secret
	slices   map[types.NamespacedName][]*discoveryv1.EndpointSlice
}

// list fills l and returns the Ingresses of class portal.
func (l *listed) list(ctx context.Context, client kubernetes.Interface) ([]*networkingv1.Ingress, error) {
	svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range svcs.Items {
		s := &svcs.Items[i]
		l.services[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	secrets, err := client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		l.secrets[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	slices, err := client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range slices.Items {
		s := &slices.Items[i]
		nn := types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
		l.slices[nn] = append(l.slices[nn], s)
	}
	list, err := client.NetworkingV1().Ingresses("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var ings []*networkingv1.Ingress
	for i := range list.Items {
		if c := list.Items[i].Spec.IngressClassName; c != nil && *c == className {
			ings = append(ings, &list.Items[i])
		}
	}
	return ings, nil
}

func (l *listed) Service(nn types.NamespacedName) *corev1.Service { return l.services[nn] }
func (l *listed) Secret(nn types.NamespacedName) *corev1.Secret   { return l.secrets[nn] }
func (l *listed) EndpointSlices(nn types.NamespacedName) []*discoveryv1.EndpointSlice {
	return l.slices[nn]
}
