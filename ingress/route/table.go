// Package route turns the Ingresses of one class, with the Services,
// EndpointSlices and Secrets they name, into a Table: an immutable view of
// every served rule that the HTTP server consults for each request. A new
// Table is built whenever an Ingress, IngressClass, Service or Secret
// changes; endpoint changes do not rebuild it, they replace the endpoint
// set of the Backends concerned in place.
package route

import (
	"crypto/tls"
	"sync/atomic"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ControllerName is the spec.controller of the IngressClasses this
// controller serves.
const ControllerName = "portal.dev/ingress"

// Table is every rule served at one moment. Its zero value routes nothing.
// It is never changed once published; readers need no lock.
type Table struct {
	// Built is when the Table was made from the objects it reflects.
	Built time.Time

	// Filled in by this package: the hosts, their routes, the default
	// backend and the certificates.
	hosts map[string]*VirtualHost
}

// VirtualHost is the routes of one host name ("foo.com", "*.foo.com", or
// "" for rules without a host).
type VirtualHost struct {
	Host string
	// Routes are in match order: longest path first, Exact before Prefix
	// at equal length.
	Routes []*Rule
}

// Match is the outcome of routing one request.
type Match struct {
	// Backend serves the request; nil means 404 (nothing matched).
	Backend *Backend
	// Ingress is the Ingress whose rule (or defaultBackend) matched.
	Ingress types.NamespacedName
	// Host and Path are the rule's host and path as written in the
	// Ingress (for metrics and logs: bounded cardinality, unlike the
	// request's own).
	Host, Path string
	// RedirectHTTPS is set when the request came over plain HTTP to a host
	// listed in spec.tls and the redirect is not turned off.
	RedirectHTTPS bool
	// Options are the per-Ingress settings from portal.dev/ annotations.
	Options *Options
}

// Rule is one path of one host, as the Table matches it.
type Rule struct {
	Path     string
	PathType networkingv1.PathType
	Ingress  types.NamespacedName
	Backend  *Backend
	Options  *Options
	// TLS is set when the rule's host is listed in the Ingress's spec.tls.
	TLS bool
}

// Options are an Ingress's settings from its portal.dev/ annotations. A
// zero duration means the server's default.
type Options struct {
	// SSLRedirect sends plain-HTTP requests to TLS hosts to HTTPS with a
	// 308 (annotation portal.dev/ssl-redirect, default true).
	SSLRedirect bool
	// ConnectTimeout, ReadTimeout and SendTimeout bound the connection to
	// an endpoint, the wait for its response (between reads) and the
	// sending of the request (portal.dev/proxy-connect-timeout,
	// portal.dev/proxy-read-timeout, portal.dev/proxy-send-timeout, as Go
	// durations or seconds).
	ConnectTimeout, ReadTimeout, SendTimeout time.Duration
}

// Protocol is how the server talks to a backend's endpoints.
type Protocol int

const (
	// HTTP1 is HTTP/1.1 with keep-alive (upgrades such as WebSocket pass
	// through).
	HTTP1 Protocol = iota
	// H2C is cleartext HTTP/2 (Service port appProtocol kubernetes.io/h2c
	// or grpc).
	H2C
)

// Backend is one Service port (or a backend that cannot be served). Many
// rules may share one Backend; its endpoints change in place.
type Backend struct {
	// Service and Port name the Service port ("80" or "http").
	Service types.NamespacedName
	Port    string
	// Protocol is from the Service port's appProtocol.
	Protocol Protocol
	// Unavailable, when not empty, is why the backend cannot be served
	// (a Resource backend, a missing Service or port); such a request is
	// answered 503 with this text.
	Unavailable string

	endpoints atomic.Pointer[Endpoints]
}

// Endpoints are the addresses ("10.0.0.5:8080", "[fd00::5]:8080") of a
// backend's endpoints, from its Service's EndpointSlices.
type Endpoints struct {
	// Ready endpoints take traffic.
	Ready []string
	// Fallback are serving but terminating endpoints, used only when no
	// endpoint is ready (as the proxy does).
	Fallback []string
}

// Endpoints returns the backend's current endpoints; never nil.
func (b *Backend) Endpoints() *Endpoints {
	if e := b.endpoints.Load(); e != nil {
		return e
	}
	return &Endpoints{}
}

// Route finds what serves a request for host (without port, lower case)
// and path (the URL path, not yet cleaned), arriving over TLS or not.
func (t *Table) Route(host, path string, overTLS bool) Match {
	panic("filled in by the route package")
}

// Certificate returns the certificate for a TLS client hello's server
// name, or nil when no Ingress has one for it (the server then uses its
// default certificate).
func (t *Table) Certificate(serverName string) *tls.Certificate {
	panic("filled in by the route package")
}
