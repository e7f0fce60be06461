package ingress

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"
)

// Options configure the ingress controller; flag names follow
// ingress-nginx where it has one. The zero value is not useful: start from
// DefaultOptions.
type Options struct {
	// HTTPPort and HTTPSPort are --http-port and --https-port: where plain
	// HTTP and TLS are served (default 80 and 443).
	HTTPPort, HTTPSPort int
	// BindAddress is --bind-address: the address both ports listen on
	// (default empty: every address).
	BindAddress string
	// IngressClass is --ingress-class: the name of the IngressClass served
	// (default "portal").
	IngressClass string
	// WatchNamespace is --watch-namespace: serve only the Ingresses of this
	// namespace (default empty: all).
	WatchNamespace string
	// DefaultSSLCertificate is --default-ssl-certificate: "namespace/name"
	// of a kubernetes.io/tls Secret served to TLS clients whose server name
	// no Ingress has (default empty: a generated certificate).
	DefaultSSLCertificate string
	// PublishService is --publish-service: "namespace/name" of the Service
	// whose load-balancer addresses are published in Ingress status.
	PublishService string
	// PublishStatusAddress is --publish-status-address: addresses
	// (comma-separated) to publish in Ingress status instead.
	PublishStatusAddress string
	// NodeName is --hostname-override: the Node whose addresses are
	// published in Ingress status when neither PublishService nor
	// PublishStatusAddress is set (default: the host name, lower-cased).
	NodeName string
	// MetricsBindAddress is --metrics-bind-address, serving /metrics and
	// /healthz (default 127.0.0.1:10254, ingress-nginx's port; empty
	// disables).
	MetricsBindAddress string
	// Profiling is --profiling: serve Go's /debug/pprof on the metrics
	// address too (default off: profiles show request paths).
	Profiling bool
	// HealthzBindAddress is --healthz-bind-address, serving /healthz alone,
	// for probes from outside the node (default empty: none).
	HealthzBindAddress string
	// AccessLog is --access-log: write a line per request to standard
	// output, in the format documented at accessLog (default on, as
	// ingress-nginx logs every request).
	AccessLog bool
	// TrustForwardedHeaders is --trust-forwarded-headers: keep the
	// X-Forwarded-For/-Proto/-Host/-Port headers clients send, appending
	// to X-Forwarded-For, for a controller behind a proxy that sets them
	// (ingress-nginx's use-forwarded-headers). Default off: they are
	// replaced by what the connection shows, as any client can forge them.
	TrustForwardedHeaders bool

	// ElectionID is --election-id: the name of the Lease in kube-system
	// that the replicas serving one class campaign for; only the holder
	// writes Ingress status (default: portal-ingress-leader-CLASS).
	ElectionID string

	// ClientBodyTimeout is --client-body-timeout: how long each read of a
	// request body may wait for the client, as nginx's client_body_timeout
	// (default 60s, ingress-nginx's; zero: no limit). A client may upload
	// slowly, not stall.
	ClientBodyTimeout time.Duration

	// ClientSendTimeout is --send-timeout: how long each write of a
	// response may wait for the client to take it, as nginx's
	// send_timeout (default 60s; zero: no limit). A client may read
	// slowly, not stop reading and hold its connection, and the
	// endpoint's, forever.
	ClientSendTimeout time.Duration

	// ConnectTimeout, ReadTimeout and SendTimeout are the defaults of the
	// per-Ingress timeouts (ingress-nginx's 5s, 60s and 60s).
	ConnectTimeout, ReadTimeout, SendTimeout time.Duration
}

// DefaultOptions returns the options of `portal ingress` without flags.
func DefaultOptions() Options {
	host, _ := os.Hostname()
	return Options{
		NodeName:           strings.ToLower(host),
		HTTPPort:           80,
		HTTPSPort:          443,
		IngressClass:       "portal",
		MetricsBindAddress: "127.0.0.1:10254",
		AccessLog:          true,
		ClientBodyTimeout:  60 * time.Second,
		ClientSendTimeout:  60 * time.Second,
		ConnectTimeout:     5 * time.Second,
		ReadTimeout:        60 * time.Second,
		SendTimeout:        60 * time.Second,
	}
}

// Validate reports the first bad option, naming its flag.
func (o Options) Validate() error {
	for flag, port := range map[string]int{"--http-port": o.HTTPPort, "--https-port": o.HTTPSPort} {
		if port < 0 || port > 65535 {
			return fmt.Errorf("%s %d: not a port (0-65535)", flag, port)
		}
	}
	if o.HTTPPort != 0 && o.HTTPPort == o.HTTPSPort {
		return fmt.Errorf("--http-port and --https-port are both %d", o.HTTPPort)
	}
	if o.BindAddress != "" {
		if _, err := netip.ParseAddr(o.BindAddress); err != nil {
			return fmt.Errorf("--bind-address %q: not an IP address", o.BindAddress)
		}
	}
	if o.IngressClass == "" {
		return fmt.Errorf("--ingress-class: empty")
	}
	for flag, v := range map[string]string{"--default-ssl-certificate": o.DefaultSSLCertificate, "--publish-service": o.PublishService} {
		if v == "" {
			continue
		}
		if ns, name, ok := strings.Cut(v, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("%s %q: want namespace/name", flag, v)
		}
	}
	for _, a := range strings.Split(o.PublishStatusAddress, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		// A host name is allowed, as ingress-nginx allows it.
		if _, err := netip.ParseAddr(a); err != nil && strings.ContainsAny(a, " /:") {
			return fmt.Errorf("--publish-status-address %q: not an IP address or host name", a)
		}
	}
	for flag, addr := range map[string]string{"--metrics-bind-address": o.MetricsBindAddress, "--healthz-bind-address": o.HealthzBindAddress} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s %q: want host:port", flag, addr)
		}
	}
	for flag, d := range map[string]time.Duration{"connect": o.ConnectTimeout, "read": o.ReadTimeout, "send": o.SendTimeout} {
		if d < 0 {
			return fmt.Errorf("proxy %s timeout %v: negative", flag, d)
		}
	}
	if o.ClientBodyTimeout < 0 {
		return fmt.Errorf("--client-body-timeout %v: negative", o.ClientBodyTimeout)
	}
	if o.ClientSendTimeout < 0 {
		return fmt.Errorf("--send-timeout %v: negative", o.ClientSendTimeout)
	}
	return nil
}

// statusAddresses are --publish-status-address's addresses.
func (o Options) statusAddresses() []string {
	var list []string
	for _, a := range strings.Split(o.PublishStatusAddress, ",") {
		if a = strings.TrimSpace(a); a != "" {
			list = append(list, a)
		}
	}
	return list
}
