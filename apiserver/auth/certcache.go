package auth

import (
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// certCacheSize bounds the verified certificates remembered; the cache
// starts over when it is full.
const certCacheSize = 4096

// CachedCertificates remembers, for up to ttl, who a client certificate
// that inner accepted belongs to, so the requests of one client do not each
// verify the chain's signature again (an ECDSA verification, a large part
// of the cost of a small write). A certificate is re-verified once ttl has
// passed and never used past its NotAfter. inner must verify against a
// fixed set of CAs: a certificate stays accepted up to ttl after its CA is
// dropped. Certificates that came with intermediates, and failures, are
// not cached.
func CachedCertificates(inner authenticator.Request, ttl time.Duration) authenticator.Request {
	c := &certCache{inner: inner, ttl: ttl, now: time.Now, entries: map[string]certEntry{}}
	return c
}

type certCache struct {
	inner authenticator.Request
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	entries map[string]certEntry
}

type certEntry struct {
	resp    authenticator.Response
	expires time.Time
}

func (c *certCache) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) != 1 {
		return c.inner.AuthenticateRequest(req)
	}
	cert := req.TLS.PeerCertificates[0]
	key := string(cert.Raw)
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		resp := e.resp
		return &resp, true, nil
	}
	resp, ok, err := c.inner.AuthenticateRequest(req)
	if err != nil || !ok || resp == nil {
		return resp, ok, err
	}
	expires := now.Add(c.ttl)
	if cert.NotAfter.Before(expires) {
		expires = cert.NotAfter
	}
	c.mu.Lock()
	if len(c.entries) >= certCacheSize {
		clear(c.entries)
	}
	c.entries[key] = certEntry{resp: *resp, expires: expires}
	c.mu.Unlock()
	return resp, true, nil
}
