package ingress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"
)

// defaultCommonName names the generated certificate, as ingress-nginx's
// "Kubernetes Ingress Controller Fake Certificate" names its own: a client
// that sees it knows no Ingress has a certificate for the name it asked.
const defaultCommonName = "Portal Ingress Default Certificate"

// selfSigned generates the certificate served when neither an Ingress
// nor --default-ssl-certificate has one for a client's server name.
func selfSigned() (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: defaultCommonName, Organization: []string{"Portal"}},
		DNSNames:     []string{"ingress.local"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("generate the default certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// tlsConfig picks a certificate for each client hello: the Ingress's for
// the server name, else the configured default (a function, as its Secret
// may change), else the generated one. Certificates are looked up at each
// handshake, so a changed Secret is served without a restart. HTTP/2 is
// offered first; TLS 1.2 is the oldest accepted, as in ingress-nginx.
func tlsConfig(routes func() Routes, configured func() *tls.Certificate, generated *tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName != "" {
				if c := routes().Certificate(hostname(hello.ServerName)); c != nil {
					return c, nil
				}
			}
			if configured != nil {
				if c := configured(); c != nil {
					return c, nil
				}
			}
			return generated, nil
		},
	}
}
