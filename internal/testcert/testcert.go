// Package testcert makes TLS certificates for tests: self-signed ones,
// and a CA that clients can trust with server certificates it issues.
// Keys are ECDSA P-256, certificates valid from an hour ago for a day,
// serials random. It is for tests only: failures end the test.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// Pair is a certificate and its key, PEM-encoded as a kubernetes.io/tls
// Secret holds them, parsed, and ready for a tls.Config.
type Pair struct {
	CertPEM, KeyPEM []byte
	// Cert is the certificate parsed.
	Cert *x509.Certificate
	// TLS is the certificate with its key, Leaf set.
	TLS *tls.Certificate
}

// CA issues server certificates; clients with Pool as their roots
// verify them.
type CA struct {
	Cert *x509.Certificate
	Pool *x509.CertPool
	key  *ecdsa.PrivateKey
}

// NewCA returns a new CA.
func NewCA(t testing.TB) *CA {
	t.Helper()
	tmpl := template("Portal test CA")
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	p := create(t, tmpl, nil, nil)
	pool := x509.NewCertPool()
	pool.AddCert(p.Cert)
	return &CA{Cert: p.Cert, Pool: pool, key: p.TLS.PrivateKey.(*ecdsa.PrivateKey)}
}

// Issue returns a server certificate for names (the first is also its
// common name), signed by ca, with a new key.
func (ca *CA) Issue(t testing.TB, names ...string) Pair {
	t.Helper()
	return create(t, server(names), ca.Cert, ca.key)
}

// SelfSigned returns a self-signed server certificate for names (the
// first is also its common name).
func SelfSigned(t testing.TB, names ...string) Pair {
	t.Helper()
	return create(t, server(names), nil, nil)
}

func template(cn string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
}

func server(names []string) *x509.Certificate {
	tmpl := template(names[0])
	tmpl.DNSNames = names
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	return tmpl
}

// create signs tmpl with a new key, by parent and its key, or by itself
// when parent is nil.
func create(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		Cert:    cert,
		TLS:     &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
	}
}
