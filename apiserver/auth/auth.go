// Package auth decides who a request comes from and what it may do.
//
// Clients authenticate with a client certificate signed by the cluster CA
// (CN is the user, O the groups, as in Kubernetes) or a bearer token listed,
// hashed, in the token file. Requests with neither are anonymous and may only
// read the health and version endpoints; every other anonymous request gets
// 401. What an authenticated user may do is decided by the chain Chain
// builds from --authorization-mode (see authz.go).
package auth

import (
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// publicPaths may be read without credentials.
var publicPaths = []string{"/healthz", "/livez", "/readyz", "/version"}

// IsPublicPath reports whether path is one of the endpoints anonymous
// clients may read, or below one (/readyz/etcd).
func IsPublicPath(path string) bool {
	for _, p := range publicPaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// Anonymous authenticates credential-less GET requests to the public paths
// as system:anonymous, and nothing else. Put it last in a union.
var Anonymous = authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
	if req.Method != http.MethodGet || !IsPublicPath(req.URL.Path) {
		return nil, false, nil
	}
	if req.Header.Get("Authorization") != "" || (req.TLS != nil && len(req.TLS.PeerCertificates) > 0) {
		// A client that presented credentials which failed must not be
		// quietly downgraded to anonymous.
		return nil, false, nil
	}
	return &authenticator.Response{User: &user.DefaultInfo{
		Name:   user.Anonymous,
		Groups: []string{user.AllUnauthenticated},
	}}, true, nil
})
