package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// countingVerifier accepts certificates whose raw bytes start with "good",
// as the CN in the raw bytes, and counts its verifications.
type countingVerifier struct{ calls int }

func (v *countingVerifier) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	v.calls++
	raw := string(req.TLS.PeerCertificates[0].Raw)
	if len(raw) < 4 || raw[:4] != "good" {
		return nil, false, errors.New("bad certificate")
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: raw[4:]}}, true, nil
}

func certRequest(raw string, notAfter time.Time, chain int) *http.Request {
	req, _ := http.NewRequest("GET", "https://x/api", nil)
	certs := []*x509.Certificate{{Raw: []byte(raw), NotAfter: notAfter}}
	for range chain {
		certs = append(certs, &x509.Certificate{Raw: []byte("intermediate")})
	}
	req.TLS = &tls.ConnectionState{PeerCertificates: certs}
	return req
}

func TestCachedCertificates(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := now.Add(24 * time.Hour)
	setup := func() (*countingVerifier, *certCache) {
		v := &countingVerifier{}
		c := CachedCertificates(v, time.Minute).(*certCache)
		c.now = func() time.Time { return now }
		return v, c
	}
	check := func(t *testing.T, c *certCache, req *http.Request, wantUser string) {
		t.Helper()
		resp, ok, err := c.AuthenticateRequest(req)
		if wantUser == "" {
			if ok || err == nil {
				t.Fatalf("accepted (%v, %v), want an error", ok, err)
			}
			return
		}
		if !ok || err != nil || resp.User.GetName() != wantUser {
			t.Fatalf("got %v %v %v, want user %s", resp, ok, err, wantUser)
		}
	}

	t.Run("one verification per certificate within ttl", func(t *testing.T) {
		v, c := setup()
		for range 3 {
			check(t, c, certRequest("goodalice", later, 0), "alice")
		}
		check(t, c, certRequest("goodbob", later, 0), "bob")
		if v.calls != 2 {
			t.Fatalf("%d verifications, want 2", v.calls)
		}
	})
	t.Run("verified again after ttl", func(t *testing.T) {
		v, c := setup()
		check(t, c, certRequest("goodalice", later, 0), "alice")
		c.now = func() time.Time { return now.Add(61 * time.Second) }
		check(t, c, certRequest("goodalice", later, 0), "alice")
		if v.calls != 2 {
			t.Fatalf("%d verifications, want 2", v.calls)
		}
	})
	t.Run("never used past NotAfter", func(t *testing.T) {
		v, c := setup()
		check(t, c, certRequest("goodalice", now.Add(time.Second), 0), "alice")
		c.now = func() time.Time { return now.Add(2 * time.Second) }
		check(t, c, certRequest("goodalice", now.Add(time.Second), 0), "alice")
		if v.calls != 2 {
			t.Fatalf("%d verifications, want 2: the expired certificate must be verified again", v.calls)
		}
	})
	t.Run("failures are not cached", func(t *testing.T) {
		v, c := setup()
		check(t, c, certRequest("evil", later, 0), "")
		check(t, c, certRequest("evil", later, 0), "")
		if v.calls != 2 {
			t.Fatalf("%d verifications, want 2", v.calls)
		}
	})
	t.Run("chains with intermediates are not cached", func(t *testing.T) {
		v, c := setup()
		check(t, c, certRequest("goodalice", later, 1), "alice")
		check(t, c, certRequest("goodalice", later, 1), "alice")
		if v.calls != 2 {
			t.Fatalf("%d verifications, want 2", v.calls)
		}
	})
	t.Run("a caller changing its response does not change the cache", func(t *testing.T) {
		_, c := setup()
		resp, _, _ := c.AuthenticateRequest(certRequest("goodalice", later, 0))
		resp.User = &user.DefaultInfo{Name: "mallory"}
		resp, _, _ = c.AuthenticateRequest(certRequest("goodalice", later, 0))
		resp.User = &user.DefaultInfo{Name: "mallory"}
		check(t, c, certRequest("goodalice", later, 0), "alice")
	})
}
