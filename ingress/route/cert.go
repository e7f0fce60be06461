package route

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// certificates maps server names to certificates. A spec.tls host is
// looked up exactly, then as a wildcard; the DNS names of certificates
// whose spec.tls entry lists no host come last, as upstream controllers
// then use the certificate's own names.
type certificates struct {
	exact, wildcard         map[string]*tls.Certificate
	leafExact, leafWildcard map[string]*tls.Certificate
}

func (c *certificates) lookup(name string) *tls.Certificate {
	if cert := c.exact[name]; cert != nil {
		return cert
	}
	suffix := ""
	if i := strings.IndexByte(name, '.'); i > 0 {
		suffix = name[i+1:]
	}
	if cert := c.wildcard[suffix]; cert != nil && suffix != "" {
		return cert
	}
	if cert := c.leafExact[name]; cert != nil {
		return cert
	}
	if cert := c.leafWildcard[suffix]; cert != nil && suffix != "" {
		return cert
	}
	return nil
}

// add records cert for a spec.tls host ("foo.com" or "*.foo.com"), or for
// the certificate's own names when fromLeaf. The first one added for a
// name keeps it: Ingresses are added oldest first.
func (c *certificates) add(name string, cert *tls.Certificate, fromLeaf bool) {
	exact, wildcard := &c.exact, &c.wildcard
	if fromLeaf {
		exact, wildcard = &c.leafExact, &c.leafWildcard
	}
	name = strings.ToLower(name)
	m := exact
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		m, name = wildcard, rest
	}
	if *m == nil {
		*m = map[string]*tls.Certificate{}
	}
	if _, taken := (*m)[name]; !taken {
		(*m)[name] = cert
	}
}

// parsedCert is a Secret's certificate, or why it cannot be used, as of
// one resourceVersion of the Secret.
type parsedCert struct {
	resourceVersion string
	cert            *tls.Certificate
	err             error
}

// errNoSecret is a TLS Secret that does not exist.
var errNoSecret = errors.New("not found")

// secretCertificate parses a kubernetes.io/tls Secret. Its errors never
// quote the key material.
func secretCertificate(s *corev1.Secret) (*tls.Certificate, error) {
	if s.Type != corev1.SecretTypeTLS {
		return nil, fmt.Errorf("type is %q, not %q", s.Type, corev1.SecretTypeTLS)
	}
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return nil, fmt.Errorf("%s or %s is empty", corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	cert, err := tls.X509KeyPair(crt, key)
	if err != nil {
		// crypto/tls's messages name the problem (no PEM block, keys do
		// not match) without echoing the key.
		return nil, fmt.Errorf("bad certificate or key: %w", err)
	}
	if cert.Leaf == nil {
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("bad certificate: %w", err)
		}
		cert.Leaf = leaf
	}
	return &cert, nil
}

// certCache parses each Secret once per resourceVersion: parsing RSA keys
// on every rebuild would make rebuilds with many TLS Ingresses slow.
type certCache map[types.NamespacedName]parsedCert

// get returns the certificate of the Secret nn (nil from src when absent),
// filling next with what it used so that the next build can reuse it.
func (c certCache) get(nn types.NamespacedName, s *corev1.Secret, next certCache) (*tls.Certificate, error) {
	if s == nil {
		return nil, errNoSecret
	}
	p, ok := c[nn]
	if !ok || p.resourceVersion != s.ResourceVersion || s.ResourceVersion == "" {
		cert, err := secretCertificate(s)
		p = parsedCert{resourceVersion: s.ResourceVersion, cert: cert, err: err}
	}
	next[nn] = p
	return p.cert, p.err
}
