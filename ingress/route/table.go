// Package route turns the Ingresses of one class, with the Services,
// EndpointSlices and Secrets they name, into a Table: an immutable view of
// every served rule that the HTTP server consults for each request. A new
// Table is built whenever an Ingress, IngressClass, Service or Secret
// changes; endpoint changes do not rebuild it, they replace the endpoint
// set of the Backends concerned in place.
//
// Matching follows the Ingress specification. A request's host picks one
// virtual host: an exact host first, then a wildcard host ("*.foo.com"
// covers exactly one more label: "bar.foo.com", not "foo.com" nor
// "baz.bar.foo.com"), then the rules written without a host. Within it the
// longest matching path wins, Exact before Prefix at equal length. Prefix
// matches path elements ("/foo" matches "/foo", "/foo/" and "/foo/bar",
// not "/foobar"), and a trailing slash in the rule is ignored.
// ImplementationSpecific paths are matched as Prefix, and an empty one as
// "/". A request that no rule of its virtual host matches goes to the
// defaultBackend of the oldest Ingress that has one, or gets a 404.
//
// Rules of all the Ingresses of the class are merged per host. When two
// Ingresses claim the same host, path and path type (or both have a
// defaultBackend, or list the same TLS host with different Secrets), the
// older one (creation time, then namespace/name) wins and the newer one
// gets a Warning Event. The package owns no socket; the Watcher is its
// only part that talks to the API.
package route

import (
	"crypto/tls"
	"strings"
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

	// hosts are the exact hosts, wildcards the "*.foo.com" hosts keyed by
	// what follows "*." ("foo.com"), anyHost the rules without a host.
	hosts     map[string]*VirtualHost
	wildcards map[string]*VirtualHost
	anyHost   *VirtualHost
	// fallback serves requests no rule matches; nil means 404.
	fallback *Rule
	certs    certificates
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
	// PathType is the matched rule's path type ("" for the default
	// backend or no match).
	PathType networkingv1.PathType
	// RedirectHTTPS is set when the request came over plain HTTP to a host
	// listed in spec.tls and the redirect is not turned off.
	RedirectHTTPS bool
	// Options are the per-Ingress settings from portal.dev/ annotations;
	// never nil (the defaults when nothing matched).
	Options *Options
}

// Rule is one path of one host, as the Table matches it.
type Rule struct {
	Path     string
	PathType networkingv1.PathType
	Ingress  types.NamespacedName
	Backend  *Backend
	Options  *Options
	// TLS is set when the rule's host is listed in the spec.tls of any
	// Ingress of the class, not only the rule's own.
	TLS bool

	// match is Path as compared: a Prefix path without its trailing
	// slash ("/" stays "/"), "/" for an empty ImplementationSpecific one.
	match  string
	prefix bool
}

// Options are an Ingress's settings from its portal.dev/ annotations (or
// ingress-nginx's of the same names, see NginxAnnotationPrefix). A zero
// duration means the server's default.
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

	// slicePort is the name of the Service port, which is the name of
	// the EndpointSlice port that carries the target port.
	slicePort string
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
	return &noEndpoints
}

var noEndpoints Endpoints

// SetEndpoints replaces the backend's endpoints; readers see the old or
// the new set, never a mix. The Watcher calls it when EndpointSlices
// change; it is exported for tests of the server.
func (b *Backend) SetEndpoints(e *Endpoints) {
	b.endpoints.Store(e)
}

// Route finds what serves a request for host (without port, lower case)
// and path (the URL path, not yet cleaned), arriving over TLS or not. It
// does not allocate unless the path needs cleaning.
func (t *Table) Route(host, path string, overTLS bool) Match {
	if t == nil {
		return Match{Options: &DefaultOptions}
	}
	path = cleanPath(path)
	if vh := t.virtualHost(host); vh != nil {
		for _, r := range vh.Routes {
			if r.matches(path) {
				return Match{
					Backend:       r.Backend,
					Ingress:       r.Ingress,
					Host:          vh.Host,
					Path:          r.Path,
					PathType:      r.PathType,
					RedirectHTTPS: r.TLS && !overTLS && r.Options.SSLRedirect,
					Options:       r.Options,
				}
			}
		}
	}
	if r := t.fallback; r != nil {
		return Match{Backend: r.Backend, Ingress: r.Ingress, Options: r.Options}
	}
	return Match{Options: &DefaultOptions}
}

// virtualHost picks the virtual host for a request's host: exact, then
// wildcard, then the rules without a host.
func (t *Table) virtualHost(host string) *VirtualHost {
	host = strings.TrimSuffix(host, ".")
	if vh := t.hosts[host]; vh != nil {
		return vh
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		if vh := t.wildcards[host[i+1:]]; vh != nil {
			return vh
		}
	}
	return t.anyHost
}

// Hosts returns the virtual hosts of the Table, the rules without a host
// (Host "") included, in no particular order.
func (t *Table) Hosts() []*VirtualHost {
	var out []*VirtualHost
	for _, vh := range t.hosts {
		out = append(out, vh)
	}
	for _, vh := range t.wildcards {
		out = append(out, vh)
	}
	if t.anyHost != nil {
		out = append(out, t.anyHost)
	}
	return out
}

// Certificate returns the certificate for a TLS client hello's server
// name, or nil when no Ingress has one for it (the server then uses its
// default certificate).
func (t *Table) Certificate(serverName string) *tls.Certificate {
	if t == nil {
		return nil
	}
	return t.certs.lookup(strings.TrimSuffix(strings.ToLower(serverName), "."))
}
