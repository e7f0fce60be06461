package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

func TestIssuedVerifies(t *testing.T) {
	ca := NewCA(t)
	p := ca.Issue(t, "a.test", "*.a.test")
	if _, err := p.Cert.Verify(x509.VerifyOptions{DNSName: "x.a.test", Roots: ca.Pool}); err != nil {
		t.Errorf("issued certificate: %v", err)
	}
	if _, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
		t.Errorf("PEM pair: %v", err)
	}
	s := SelfSigned(t, "b.test")
	if s.Cert.Subject.CommonName != "b.test" || s.Cert.SerialNumber.Cmp(p.Cert.SerialNumber) == 0 {
		t.Errorf("self-signed: got CN %q serial %v, want b.test and a serial of its own", s.Cert.Subject.CommonName, s.Cert.SerialNumber)
	}
}
