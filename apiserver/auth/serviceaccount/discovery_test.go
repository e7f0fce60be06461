package serviceaccount

import (
	"crypto"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
)

func TestDiscovery(t *testing.T) {
	key := rsaKey(t)
	d, err := NewDiscovery(testIssuer, "https://10.0.0.1:6443/openid/v1/jwks", []crypto.PublicKey{key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.ConfigurationHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, OpenIDConfigurationPath, nil))
	if got, want := rec.Header().Get("Content-Type"), "application/json"; got != want {
		t.Errorf("configuration content type: got %q, want %q", got, want)
	}
	var config map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &config); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"issuer":                                testIssuer,
		"jwks_uri":                              "https://10.0.0.1:6443/openid/v1/jwks",
		"response_types_supported":              []any{"id_token"},
		"subject_types_supported":               []any{"public"},
		"id_token_signing_alg_values_supported": []any{"RS256"},
	}
	if diff := cmp.Diff(want, config); diff != "" {
		t.Errorf("configuration (-want +got):\n%s", diff)
	}

	rec = httptest.NewRecorder()
	d.JWKSHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, JWKSPath, nil))
	if got, want := rec.Header().Get("Content-Type"), "application/jwk-set+json"; got != want {
		t.Errorf("jwks content type: got %q, want %q", got, want)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil {
		t.Fatal(err)
	}
	kid, _ := keyID(key.Public())
	if len(set.Keys) != 1 || set.Keys[0].KeyID != kid || set.Keys[0].Use != "sig" || set.Keys[0].Algorithm != "RS256" || !set.Keys[0].IsPublic() {
		t.Errorf("jwks: got %+v, want one public RS256 signing key with kid %s", set.Keys, kid)
	}

	rec = httptest.NewRecorder()
	d.JWKSHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, JWKSPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: got %d, want 405", rec.Code)
	}
}
