package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"portal.dev/portal/internal/apilb"
)

// apiFlags say how a component that runs apart from the API servers finds
// them: its kubeconfig (credential, CA, one server) and any further servers.
type apiFlags struct {
	kubeconfig string
	servers    []string
}

func (f *apiFlags) add(fs *pflag.FlagSet, kubeconfigHelp string) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", kubeconfigHelp)
	fs.StringSliceVar(&f.servers, "server", nil, "API server URLs besides the kubeconfig's (comma-separated or repeated); the component reaches whichever answers through a load balancer on loopback, and learns the rest from the kubernetes Service's endpoints")
}

// componentClient reads --kubeconfig for a component that runs apart from
// the API server, puts a load balancer in front of every API server it
// knows (running until ctx ends), and returns a configuration that goes
// through it and a clientset speaking protobuf (JSON where a type has no
// protobuf form).
func componentClient(ctx context.Context, f apiFlags, userAgent string) (*rest.Config, kubernetes.Interface, error) {
	cfg, err := componentConfig(ctx, f, userAgent)
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, client, nil
}

// componentConfig is componentClient's configuration alone.
func componentConfig(ctx context.Context, f apiFlags, userAgent string) (*rest.Config, error) {
	if f.kubeconfig == "" {
		return nil, fmt.Errorf("--kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = userAgent
	return withLoadBalancer(ctx, cfg, f.servers)
}

// withLoadBalancer starts a load balancer seeded with cfg's server and
// extra, on a free loopback port, and returns cfg pointed at it. The
// servers' certificates name 127.0.0.1, so the client verifies whichever
// server answers.
func withLoadBalancer(ctx context.Context, cfg *rest.Config, extra []string) (*rest.Config, error) {
	lb, err := newAPIBalancer(cfg, extra, "")
	if err != nil {
		return nil, err
	}
	go func() {
		if err := lb.run(ctx); err != nil {
			klog.ErrorS(err, "API load balancer stopped")
		}
	}()
	return lb.through, nil
}

// apiBalancer is a load balancer in front of the API servers, with the
// client configuration that goes through it.
type apiBalancer struct {
	lb *apilb.Balancer
	// through is the client configuration pointed at the balancer.
	through   *rest.Config
	discovery kubernetes.Interface
}

// newAPIBalancer listens on listen (a free loopback port when empty) for a
// balancer seeded with cfg's server and extra, which judges servers with
// cfg's credential.
func newAPIBalancer(cfg *rest.Config, extra []string, listen string) (*apiBalancer, error) {
	var seeds []string
	for _, s := range append([]string{cfg.Host}, extra...) {
		hp, err := hostPort(s)
		if err != nil {
			return nil, fmt.Errorf("--server %q: %w", s, err)
		}
		seeds = append(seeds, hp)
	}
	check, err := healthCheck(cfg)
	if err != nil {
		return nil, err
	}
	lb, err := apilb.New(apilb.Config{Servers: seeds, Check: check, ListenAddress: listen})
	if err != nil {
		return nil, err
	}
	through := rest.CopyConfig(cfg)
	through.Host = schemeOf(cfg.Host) + "://" + lb.Addr()
	discovery, err := kubernetes.NewForConfig(rest.CopyConfig(through))
	if err != nil {
		return nil, err
	}
	klog.InfoS("Reaching the API servers through a load balancer", "address", lb.Addr(), "servers", seeds)
	return &apiBalancer{lb: lb, through: through, discovery: discovery}, nil
}

// run forwards connections and learns the servers from the kubernetes
// Service's endpoints until ctx ends.
func (b *apiBalancer) run(ctx context.Context) error {
	go apilb.Discover(ctx, b.discovery, b.lb)
	return b.lb.Run(ctx)
}

// healthCheck judges a server ready when it answers 200 on /readyz with
// cfg's credential. Any other answer (500 from a server cut from etcd quorum,
// whose watch cache no longer moves; 403 from one still syncing its RBAC
// caches) is apilb.ErrNotReady, so the balancer moves components to a ready
// server when there is one and keeps using this one when there is not.
func healthCheck(cfg *rest.Config) (func(context.Context, string) error, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	scheme := schemeOf(cfg.Host)
	return func(ctx context.Context, server string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+server+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%w: /readyz answered %s", apilb.ErrNotReady, resp.Status)
		}
		return nil
	}, nil
}

// schemeOf is the scheme of a server URL: http when it says so, https
// otherwise (a bare host:port included). The balancer passes bytes through,
// so the client must speak what the server speaks.
func schemeOf(server string) string {
	if u, err := url.Parse(server); err == nil && u.Scheme == "http" {
		return "http"
	}
	return "https"
}

// hostPort turns a server URL (https://host:port, or host:port) into
// host:port, 443 when no port is given.
func hostPort(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("no host")
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}
