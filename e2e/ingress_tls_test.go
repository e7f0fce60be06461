package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/internal/testcert"
)

func tlsSecret(name string, l testcert.Pair) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: l.CertPEM, corev1.TLSPrivateKeyKey: l.KeyPEM}}
}

// handshake makes a TLS connection from the client namespace to the node's
// port 443 with serverName as SNI, offering protos by ALPN, and returns
// its state; with roots, the served certificate must verify for
// serverName.
func (ib *ingressBed) handshake(serverName string, roots *x509.CertPool, protos ...string) (tls.ConnectionState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := ib.dialNode(ctx, "tcp", ":443")
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer conn.Close()
	tc := tls.Client(conn, &tls.Config{ServerName: serverName, RootCAs: roots, NextProtos: protos, InsecureSkipVerify: roots == nil})
	if err := tc.HandshakeContext(ctx); err != nil {
		return tls.ConnectionState{}, err
	}
	return tc.ConnectionState(), nil
}

// testTLS: two hosts with a Secret each, SNI picking the certificate,
// HTTP/2 by ALPN, the redirect of plain HTTP, and a Secret update served
// within 2 s while a connection opened before keeps working.
func (ib *ingressBed) testTLS(t *testing.T) {
	ctx := context.Background()
	ca := testcert.NewCA(t)
	certs := map[string]testcert.Pair{"a.tls.test": ca.Issue(t, "a.tls.test"), "b.tls.test": ca.Issue(t, "b.tls.test")}
	for _, s := range []*corev1.Secret{tlsSecret("tls-a", certs["a.tls.test"]), tlsSecret("tls-b", certs["b.tls.test"])} {
		if _, err := ib.c.CoreV1().Secrets("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ing := ingress("tls", rule("a.tls.test", path{"/", prefix, "alpha"}), rule("b.tls.test", path{"/", prefix, "beta"}))
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"a.tls.test"}, SecretName: "tls-a"}, {Hosts: []string{"b.tls.test"}, SecretName: "tls-b"}}
	apply(t, ib.server, ing)

	t.Run("SNI picks the certificate, ALPN h2", func(t *testing.T) {
		for host, l := range certs {
			eventuallyWithin(t, 30*time.Second, "the certificate of "+host+" served", func() (bool, string) {
				st, err := ib.handshake(host, ca.Pool, "h2", "http/1.1")
				if err != nil {
					return false, fmt.Sprintf("handshake with SNI %s: %v", host, err)
				}
				leafCert := st.PeerCertificates[0]
				if leafCert.SerialNumber.Cmp(l.Cert.SerialNumber) != 0 || !slices.Equal(leafCert.DNSNames, []string{host}) {
					return false, fmt.Sprintf("SNI %s: got certificate %v serial %v, want [%s] serial %v", host, leafCert.DNSNames, leafCert.SerialNumber, host, l.Cert.SerialNumber)
				}
				return st.NegotiatedProtocol == "h2", fmt.Sprintf("SNI %s: got ALPN protocol %q, want h2", host, st.NegotiatedProtocol)
			})
		}
	})

	t.Run("HTTP/2 requests reach each host's Service", func(t *testing.T) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: ib.dialNode,
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, ForceAttemptHTTP2: true}}
		for host, want := range map[string]string{"a.tls.test": "alpha", "b.tls.test": "beta"} {
			resp, err := client.Get("https://" + host + "/h2")
			if err != nil {
				t.Fatalf("GET https://%s/h2: %v", host, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != 200 || serviceOf(resp.Header.Get("X-Backend")) != want {
				t.Errorf("GET https://%s/h2: got %s %d from %q, want HTTP/2.0 200 from %s", host, resp.Proto, resp.StatusCode, resp.Header.Get("X-Backend"), want)
			}
		}
	})

	t.Run("plain HTTP to a TLS host is redirected", func(t *testing.T) {
		got := ib.curl("http://a.tls.test/some/path?q=1")
		if want := "https://a.tls.test/some/path?q=1"; got.code != 308 || got.location != want {
			t.Errorf("GET http://a.tls.test/some/path?q=1: got %v Location %q, want 308 to %s", got, got.location, want)
		}
	})

	t.Run("a Secret update is served within 2 s, kept-alive connections live on", func(t *testing.T) {
		ib.testSecretUpdate(t, ca, certs["a.tls.test"])
	})

	// The private keys never reach the log.
	data, err := os.ReadFile(filepath.Join(ib.server.DataDir, "portal.log"))
	if err != nil {
		t.Fatal(err)
	}
	for host, l := range certs {
		keyLines := strings.Split(strings.TrimSpace(string(l.KeyPEM)), "\n")
		if body := keyLines[1]; strings.Contains(string(data), body) {
			t.Errorf("the server log holds the private key of %s", host)
		}
	}
}

// testSecretUpdate replaces the Secret tls-a by a new certificate of
// a.tls.test and measures how long until new handshakes get it. A
// connection opened and used before the update must keep working after.
func (ib *ingressBed) testSecretUpdate(t *testing.T, ca *testcert.CA, old testcert.Pair) {
	kept := ib.keep(t, ":443", &tls.Config{ServerName: "a.tls.test", RootCAs: ca.Pool, NextProtos: []string{"http/1.1"}})
	get := func() answer { return kept.get("a.tls.test", "/kept") }
	if got := get(); got.code != 200 || serviceOf(got.backend) != "alpha" {
		t.Fatalf("GET https://a.tls.test/kept before the update: got %v, want 200 from alpha", got)
	}
	if serial := kept.conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber; serial.Cmp(old.Cert.SerialNumber) != 0 {
		t.Fatalf("the kept connection got certificate serial %v, want %v", serial, old.Cert.SerialNumber)
	}

	ctx := context.Background()
	renewed := ca.Issue(t, "a.tls.test")
	if _, err := ib.c.CoreV1().Secrets("default").Update(ctx, tlsSecret("tls-a", renewed), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := time.Now()
	var took time.Duration
	var last string
	for {
		st, err := ib.handshake("a.tls.test", ca.Pool)
		took = time.Since(updated)
		if err == nil && st.PeerCertificates[0].SerialNumber.Cmp(renewed.Cert.SerialNumber) == 0 {
			break
		}
		if last = fmt.Sprintf("error %v", err); err == nil {
			last = fmt.Sprintf("serial %v", st.PeerCertificates[0].SerialNumber)
		}
		if took >= 30*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	switch {
	case took >= 30*time.Second:
		t.Errorf("the renewed certificate (serial %v) not served after 30 s; handshakes get %s", renewed.Cert.SerialNumber, last)
	case took > 2*time.Second:
		t.Errorf("the renewed certificate served %v after the Secret update, want within 2s", took.Round(time.Millisecond))
	default:
		t.Logf("the renewed certificate served %v after the Secret update", took.Round(time.Millisecond))
	}
	if got := get(); got.code != 200 || serviceOf(got.backend) != "alpha" {
		t.Errorf("GET https://a.tls.test/kept on the connection opened before the update: got %v, want 200 from alpha", got)
	}
}
