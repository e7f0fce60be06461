package route

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Sources gives a build the objects that Ingresses name. Each returns nil
// (or nothing) when the object does not exist.
type Sources interface {
	Service(types.NamespacedName) *corev1.Service
	Secret(types.NamespacedName) *corev1.Secret
	// EndpointSlices are the slices labelled with the Service's name
	// (kubernetes.io/service-name) in its namespace.
	EndpointSlices(service types.NamespacedName) []*discoveryv1.EndpointSlice
}

// Input is what a Table is built from.
type Input struct {
	// Ingresses are the Ingresses of the served class, in any order.
	Ingresses []*networkingv1.Ingress
	Sources   Sources
	// Previous is the last build's result (nil for the first): its
	// Backends and parsed certificates are reused where nothing changed.
	Previous *Result
	// Now is stamped on the Table as Built.
	Now time.Time
}

// Problem is something wrong with an Ingress that the build worked
// around; the Watcher turns each into a Warning Event on the Ingress.
type Problem struct {
	Ingress *networkingv1.Ingress
	// Reason is a CamelCase word (RuleConflict, ServiceNotFound, ...).
	Reason  string
	Message string
}

// Result is a built Table with what the build found wrong and the state
// the next build and endpoint updates need.
type Result struct {
	Table    *Table
	Problems []Problem

	backends  map[backendKey]*Backend
	byService map[types.NamespacedName][]*Backend
	services  map[types.NamespacedName]struct{}
	secrets   map[types.NamespacedName]struct{}
	certs     certCache
	ingresses map[types.UID]bool
}

// UsesService reports whether a rule or default backend names the
// Service: only then does a change to it need a rebuild.
func (r *Result) UsesService(nn types.NamespacedName) bool {
	_, ok := r.services[nn]
	return ok
}

// UsesSecret reports whether a spec.tls entry names the Secret.
func (r *Result) UsesSecret(nn types.NamespacedName) bool {
	_, ok := r.secrets[nn]
	return ok
}

// UpdateEndpoints replaces the endpoints of every Backend of the Service
// with those of its current slices, in place (the Table stays as it is).
// It reports whether any Backend's endpoints changed.
func (r *Result) UpdateEndpoints(svc types.NamespacedName, slices []*discoveryv1.EndpointSlice) bool {
	changed := false
	for _, be := range r.byService[svc] {
		e := endpointsFrom(slices, be.slicePort)
		if !sameEndpoints(be.Endpoints(), e) {
			be.SetEndpoints(e)
			changed = true
		}
	}
	return changed
}

// ruleKey is what two Ingresses must not both claim.
type ruleKey struct {
	host, match string
	prefix      bool
}

type tlsClaim struct {
	ing    *networkingv1.Ingress
	secret string
}

// builder holds one build's state.
type builder struct {
	in           Input
	t            *Table
	backends     map[backendKey]*Backend
	prevBackends map[backendKey]*Backend
	byService    map[types.NamespacedName][]*Backend
	services     map[types.NamespacedName]struct{}
	secrets      map[types.NamespacedName]struct{}
	certs        certCache
	prevCerts    certCache
	problems     []Problem
	claimed      map[ruleKey]*networkingv1.Ingress
	tlsClaims    map[string]tlsClaim
	// tlsHosts tell, one per Ingress with spec.tls, whether a host is one
	// of its TLS hosts.
	tlsHosts []func(host string) bool
}

// Build makes a Table from the Ingresses of the class and the objects
// they name. It is pure: everything it reads comes from in.
func Build(in Input) *Result {
	n := len(in.Ingresses) // sizes the maps: growing them is most of a build's time
	b := &builder{
		in:        in,
		t:         &Table{Built: in.Now, hosts: make(map[string]*VirtualHost, n), wildcards: map[string]*VirtualHost{}},
		backends:  make(map[backendKey]*Backend, n),
		byService: make(map[types.NamespacedName][]*Backend, n),
		services:  make(map[types.NamespacedName]struct{}, n),
		secrets:   map[types.NamespacedName]struct{}{},
		certs:     certCache{},
		claimed:   make(map[ruleKey]*networkingv1.Ingress, 2*n),
		tlsClaims: map[string]tlsClaim{},
	}
	if p := in.Previous; p != nil {
		b.prevBackends, b.prevCerts = p.backends, p.certs
	}
	ingresses := make(map[types.UID]bool, len(in.Ingresses))
	for _, ing := range oldestFirst(in.Ingresses) {
		ingresses[ing.UID] = true
		b.addIngress(ing)
	}
	b.markTLS()
	for _, vh := range b.t.Hosts() {
		slices.SortStableFunc(vh.Routes, func(x, y *Rule) int {
			switch {
			case before(x, y):
				return -1
			case before(y, x):
				return 1
			}
			return 0
		})
	}
	return &Result{
		Table: b.t, Problems: b.problems,
		backends: b.backends, byService: b.byService,
		services: b.services, secrets: b.secrets, certs: b.certs,
		ingresses: ingresses,
	}
}

// oldestFirst orders Ingresses as conflicts are settled: by creation
// time, then namespace/name.
func oldestFirst(ings []*networkingv1.Ingress) []*networkingv1.Ingress {
	out := slices.Clone(ings)
	slices.SortFunc(out, func(a, b *networkingv1.Ingress) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func (b *builder) problem(ing *networkingv1.Ingress, reason, msg string) {
	b.problems = append(b.problems, Problem{Ingress: ing, Reason: reason, Message: msg})
}

func (b *builder) addIngress(ing *networkingv1.Ingress) {
	opts := parseOptions(ing, func(reason, msg string) { b.problem(ing, reason, msg) })
	if isTLS := b.addTLS(ing); isTLS != nil {
		b.tlsHosts = append(b.tlsHosts, isTLS)
	}
	if db := ing.Spec.DefaultBackend; db != nil {
		b.addDefaultBackend(ing, db, opts)
	}
	for _, r := range ing.Spec.Rules {
		host := strings.ToLower(r.Host)
		// A host without paths still owns its requests (they get the
		// default backend), as an nginx server block without locations.
		b.virtualHost(host)
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			b.addPath(ing, host, p, opts)
		}
	}
}

func (b *builder) addDefaultBackend(ing *networkingv1.Ingress, db *networkingv1.IngressBackend, opts *Options) {
	if owner := b.t.fallback; owner != nil {
		b.problem(ing, "DefaultBackendConflict", fmt.Sprintf(
			"the defaultBackend of the older Ingress %s is used; this one's is ignored", owner.Ingress))
		return
	}
	be, reason, msg := b.resolveBackend(ing.Namespace, db)
	if reason != "" {
		b.problem(ing, reason, "defaultBackend: "+msg)
	}
	b.t.fallback = &Rule{Ingress: nameOf(ing), Backend: be, Options: opts}
}

func (b *builder) addPath(ing *networkingv1.Ingress, host string, p networkingv1.HTTPIngressPath, opts *Options) {
	pt := networkingv1.PathTypeImplementationSpecific
	if p.PathType != nil {
		pt = *p.PathType
	}
	match, prefix, ok := matchPath(p.Path, pt)
	if !ok {
		b.problem(ing, "InvalidPath", fmt.Sprintf(
			"host %s: path %q of type %s does not start with /; the rule is ignored", hostText(host), p.Path, pt))
		return
	}
	key := ruleKey{host: host, match: match, prefix: prefix}
	if owner := b.claimed[key]; owner != nil {
		if owner == ing {
			b.problem(ing, "RuleConflict", fmt.Sprintf(
				"host %s path %q (%s) is listed twice; the first one is used", hostText(host), p.Path, pt))
		} else {
			b.problem(ing, "RuleConflict", fmt.Sprintf(
				"host %s path %q (%s) is already served by the older Ingress %s; this rule is ignored",
				hostText(host), p.Path, pt, nameOf(owner)))
		}
		return
	}
	b.claimed[key] = ing
	be, reason, msg := b.resolveBackend(ing.Namespace, &p.Backend)
	if reason != "" {
		b.problem(ing, reason, fmt.Sprintf("host %s path %q: %s", hostText(host), p.Path, msg))
	}
	vh := b.virtualHost(host)
	vh.Routes = append(vh.Routes, &Rule{
		Path: p.Path, PathType: pt, Ingress: nameOf(ing), Backend: be, Options: opts,
		match: match, prefix: prefix,
	})
}

func (b *builder) virtualHost(host string) *VirtualHost {
	m, key := b.t.hosts, host
	switch {
	case host == "":
		if b.t.anyHost == nil {
			b.t.anyHost = &VirtualHost{}
		}
		return b.t.anyHost
	case strings.HasPrefix(host, "*."):
		m, key = b.t.wildcards, host[2:]
	}
	vh := m[key]
	if vh == nil {
		vh = &VirtualHost{Host: host}
		m[key] = vh
	}
	return vh
}

// markTLS marks the rules of every TLS host, once all Ingresses are
// added. A host is a TLS host when any Ingress lists it in spec.tls, so
// a rule another Ingress adds to it without spec.tls is redirected to
// HTTPS too: TLS belongs to the host (an nginx server block), not to the
// Ingress, as ingress-nginx does it. Whether a rule redirects is still
// its own Ingress's ssl-redirect.
func (b *builder) markTLS() {
	if len(b.tlsHosts) == 0 {
		return
	}
	for _, vh := range b.t.Hosts() {
		if vh.Host == "" {
			continue
		}
		tls := slices.ContainsFunc(b.tlsHosts, func(isTLS func(string) bool) bool { return isTLS(vh.Host) })
		for _, r := range vh.Routes {
			r.TLS = tls
		}
	}
}

// addTLS adds the certificates of an Ingress's spec.tls and returns which
// hosts are its TLS hosts (nil when it has no spec.tls). A Secret that
// cannot be used leaves its hosts TLS hosts, served with the default
// certificate.
func (b *builder) addTLS(ing *networkingv1.Ingress) func(host string) bool {
	if len(ing.Spec.TLS) == 0 {
		return nil
	}
	hosts := map[string]bool{}
	var leaves []*tls.Certificate
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			hosts[strings.ToLower(h)] = true
		}
		cert := b.tlsCertificate(ing, t)
		if cert == nil {
			continue
		}
		if len(t.Hosts) == 0 {
			leaves = append(leaves, cert)
			for _, name := range cert.Leaf.DNSNames {
				b.t.certs.add(name, cert, true)
			}
			continue
		}
		for _, h := range t.Hosts {
			b.claimTLSHost(ing, strings.ToLower(h), t.SecretName, cert)
		}
	}
	return func(host string) bool {
		if host == "" {
			return false
		}
		if hosts[host] {
			return true
		}
		if i := strings.IndexByte(host, '.'); i > 0 && hosts["*"+host[i:]] {
			return true
		}
		for _, c := range leaves {
			if strings.HasPrefix(host, "*.") && slices.Contains(c.Leaf.DNSNames, host) ||
				c.Leaf.VerifyHostname(host) == nil {
				return true
			}
		}
		return false
	}
}

// tlsCertificate returns the certificate of a spec.tls entry, or nil
// (after reporting why) when its Secret cannot be used.
func (b *builder) tlsCertificate(ing *networkingv1.Ingress, t networkingv1.IngressTLS) *tls.Certificate {
	if t.SecretName == "" {
		return nil
	}
	nn := types.NamespacedName{Namespace: ing.Namespace, Name: t.SecretName}
	b.secrets[nn] = struct{}{}
	cert, err := b.prevCerts.get(nn, b.in.Sources.Secret(nn), b.certs)
	if err != nil {
		hosts := "the hosts of the certificate"
		if len(t.Hosts) > 0 {
			hosts = strings.Join(t.Hosts, ", ")
		}
		b.problem(ing, "TLSSecretInvalid", fmt.Sprintf(
			"TLS secret %s: %v; serving %s with the default certificate", nn, err, hosts))
		return nil
	}
	return cert
}

func (b *builder) claimTLSHost(ing *networkingv1.Ingress, host, secret string, cert *tls.Certificate) {
	claim, taken := b.tlsClaims[host]
	if !taken {
		b.tlsClaims[host] = tlsClaim{ing: ing, secret: secret}
		b.t.certs.add(host, cert, false)
		return
	}
	if claim.ing != ing && (claim.ing.Namespace != ing.Namespace || claim.secret != secret) {
		b.problem(ing, "TLSConflict", fmt.Sprintf(
			"TLS host %s already has the certificate of secret %s/%s from the older Ingress %s; secret %s is not used for it",
			host, claim.ing.Namespace, claim.secret, nameOf(claim.ing), secret))
	}
}

func nameOf(ing *networkingv1.Ingress) types.NamespacedName {
	return types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
}

func hostText(host string) string {
	if host == "" {
		return "(any)"
	}
	return host
}
