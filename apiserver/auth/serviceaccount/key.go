package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/client-go/util/keyutil"

	"portal.dev/portal/pki"
)

// LoadOrCreateSigningKey reads the PEM private key at path, or creates an
// RSA 2048 key there (mode 0600, its directory 0700) when the file does
// not exist. RSA keeps the tokens RS256, which every OIDC verifier knows.
func LoadOrCreateSigningKey(path string) (crypto.Signer, error) {
	key, err := LoadSigningKey(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := pki.WriteFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("write service account signing key: %w", err)
	}
	return rsaKey, nil
}

// LoadSigningKey reads a PEM private key (PKCS#1, PKCS#8 or SEC 1, RSA or
// ECDSA), as kube-apiserver's --service-account-signing-key-file.
func LoadSigningKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := keyutil.ParsePrivateKeyPEM(data)
	if err != nil {
		// keyutil's error names the file's content type, never its bytes.
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("%s: want an RSA or ECDSA key, got %T", path, key)
}

// LoadPublicKeys reads the PEM public keys, certificates or private keys
// in path, as kube-apiserver's --service-account-key-file: tokens signed
// by any of them are accepted.
func LoadPublicKeys(path string) ([]crypto.PublicKey, error) {
	keys, err := keyutil.PublicKeysFromFile(path)
	if err != nil {
		return nil, err
	}
	out := make([]crypto.PublicKey, len(keys))
	for i, k := range keys {
		out[i] = k
	}
	return out, nil
}

// keyID is the kid of a public key: the unpadded base64url SHA-256 of its
// DER form, as upstream computes it, so that a verifier picks the key from
// the JWKS without trying each.
func keyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// algorithm is the JWS algorithm a key signs with.
func algorithm(pub crypto.PublicKey) (jose.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return jose.RS256, nil
	case *ecdsa.PublicKey:
		switch k.Curve.Params().BitSize {
		case 256:
			return jose.ES256, nil
		case 384:
			return jose.ES384, nil
		case 521:
			return jose.ES512, nil
		}
	}
	return "", fmt.Errorf("unsupported service account key %T", pub)
}
