//go:build linux

package agent

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"portal.dev/portal/pki"
)

// TestLogEndpointOnlyAPIServer: the log endpoint serves the API server's
// client certificate and refuses every other certificate the cluster CA
// signed (an administrator's, a node's) with 403. It used to serve any
// certificate of the CA, so any node could read every other node's logs.
func TestLogEndpointOnlyAPIServer(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.LoadOrCreateCA(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	srv := httptest.NewUnstartedServer(onlyUser(pki.APIServerAgentClientUser, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "log line\n")
	})))
	srv.TLS = &tls.Config{ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()

	for _, tc := range []struct {
		name   string
		ca     *pki.CA
		user   string
		groups []string
		want   int // 0: the TLS handshake fails
	}{
		{"the API server", ca, pki.APIServerAgentClientUser, nil, http.StatusOK},
		{"an administrator", ca, "admin", []string{"system:masters"}, http.StatusForbidden},
		{"another node", ca, "system:node:node2", []string{"system:nodes"}, http.StatusForbidden},
		{"the API server's name from another CA", other, pki.APIServerAgentClientUser, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM, err := tc.ca.IssueClient(tc.user, tc.groups)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
				Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}}
			resp, err := c.Get(srv.URL + "/containerLogs/default/web/main")
			got := 0
			if err == nil {
				got = resp.StatusCode
				resp.Body.Close()
			}
			if got != tc.want {
				t.Errorf("got status %d (err %v), want %d", got, err, tc.want)
			}
		})
	}
}
