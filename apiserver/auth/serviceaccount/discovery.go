package serviceaccount

import (
	"crypto"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	jose "github.com/go-jose/go-jose/v4"
)

// The paths of OIDC discovery, as kube-apiserver serves them.
const (
	OpenIDConfigurationPath = "/.well-known/openid-configuration"
	JWKSPath                = "/openid/v1/jwks"
)

// openIDConfiguration is the subset of OpenID Provider Metadata that
// upstream publishes: enough for a verifier to find the keys.
type openIDConfiguration struct {
	Issuer        string   `json:"issuer"`
	JWKSURI       string   `json:"jwks_uri"`
	ResponseTypes []string `json:"response_types_supported"`
	SubjectTypes  []string `json:"subject_types_supported"`
	SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
}

// Discovery holds the two documents, built once: the keys do not change
// while the server runs.
type Discovery struct {
	config, jwks []byte
}

// NewDiscovery builds the documents for issuer with the given verification
// keys. jwksURI is where the key set is published; empty means the
// issuer's own /openid/v1/jwks.
func NewDiscovery(issuer, jwksURI string, keys []crypto.PublicKey) (*Discovery, error) {
	if jwksURI == "" {
		u, err := url.Parse(issuer)
		if err != nil {
			return nil, fmt.Errorf("service account issuer %q: %w", issuer, err)
		}
		u.Path, u.RawQuery, u.Fragment = JWKSPath, "", ""
		jwksURI = u.String()
	}
	set := jose.JSONWebKeySet{}
	var algs []string
	for _, k := range keys {
		alg, err := algorithm(k)
		if err != nil {
			return nil, err
		}
		kid, err := keyID(k)
		if err != nil {
			return nil, err
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: string(alg), Use: "sig"})
		if !slices.Contains(algs, string(alg)) {
			algs = append(algs, string(alg))
		}
	}
	slices.Sort(algs)
	config, err := json.Marshal(openIDConfiguration{
		Issuer: issuer, JWKSURI: jwksURI,
		ResponseTypes: []string{"id_token"}, SubjectTypes: []string{"public"}, SigningAlgs: algs,
	})
	if err != nil {
		return nil, err
	}
	jwks, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	return &Discovery{config: config, jwks: jwks}, nil
}

// ConfigurationHandler serves /.well-known/openid-configuration.
func (d *Discovery) ConfigurationHandler() http.Handler {
	return serveDocument(d.config, "application/json")
}

// JWKSHandler serves /openid/v1/jwks, with the JWK Set media type as
// upstream.
func (d *Discovery) JWKSHandler() http.Handler {
	return serveDocument(d.jwks, "application/jwk-set+json")
}

func serveDocument(body []byte, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", contentType)
		// Verifiers may cache the documents for an hour, as upstream allows.
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Write(body)
	})
}
