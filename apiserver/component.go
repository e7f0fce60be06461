package apiserver

import (
	"fmt"
	"net"
	"path/filepath"

	"k8s.io/client-go/rest"

	"portal.dev/portal/pki"
)

// ComponentConfig returns the client configuration an in-process component
// of `portal server` uses: its own client certificate, issued by the data
// directory's CA for user in groups, over HTTPS to this server, exactly as
// the component would connect from another machine.
func ComponentConfig(o Options, user string, groups ...string) (*rest.Config, error) {
	ca, err := pki.LoadOrCreateCA(filepath.Join(o.DataDir, "pki"), "ca")
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	cert, key, err := ca.IssueClient(user, groups)
	if err != nil {
		return nil, err
	}
	host := o.BindAddress.String()
	if o.BindAddress == nil || o.BindAddress.IsUnspecified() {
		host = "127.0.0.1"
	}
	return &rest.Config{
		Host: "https://" + net.JoinHostPort(host, fmt.Sprint(o.SecurePort)),
		TLSClientConfig: rest.TLSClientConfig{
			CAData: ca.CertPEM, CertData: cert, KeyData: key,
		},
		UserAgent: "portal-" + user,
		// Compression saves no bandwidth to a server on this host and
		// costs memory and CPU on both ends: k8s.io/apiserver compresses
		// each event of a watch-list stream (what client-go's informers
		// open) on its own, with a gzip writer from a pool that every
		// collection empties, and a new writer allocates over a MiB.
		// Lease and status updates reach the components' watches every few
		// seconds, so an idle server kept allocating such writers.
		DisableCompression: true,
	}, nil
}
