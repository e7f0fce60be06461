// Package clusterjoin lets a server join the embedded etcd cluster of
// another: the join token (its secret, and the hash of the cluster CA that
// pins the server a joiner talks to), the endpoints a server answers joins
// on, and the joiner's side that fetches what every server must share. It
// owns the token file in the data directory; the etcd membership itself is
// changed through the Membership interface, and the files it receives are
// written by the joiner's caller.
package clusterjoin

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"portal.dev/portal/pki"
)

// tokenPrefix starts a token that pins the CA, as k3s's "K10" does: the
// prefix, the hex SHA-256 of the CA certificate, "::", the secret.
const tokenPrefix = "P10"

// Token is a join token: the shared secret, and the hash of the cluster
// CA certificate when the token pins it.
type Token struct {
	// CAHash is the SHA-256 of the CA certificate's DER bytes; empty when
	// the token is a bare secret.
	CAHash string
	// Secret authenticates a joiner to the servers.
	Secret string
}

// ParseToken reads a token in either form: "P10<hash>::<secret>" or a
// bare secret.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Token{}, errors.New("empty join token")
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return Token{}, errors.New("join token has white space in it")
	}
	hash, secret, pinned := strings.Cut(s, "::")
	if !pinned || !strings.HasPrefix(hash, tokenPrefix) {
		return Token{Secret: s}, nil
	}
	hash = strings.TrimPrefix(hash, tokenPrefix)
	if b, err := hex.DecodeString(hash); err != nil || len(b) != sha256.Size {
		return Token{}, fmt.Errorf("join token: %q is not the hex SHA-256 of a CA certificate", hash)
	}
	if secret == "" {
		return Token{}, errors.New("join token has no secret after ::")
	}
	return Token{CAHash: strings.ToLower(hash), Secret: secret}, nil
}

// String is the token in its pinned form when it has a CA hash.
func (t Token) String() string {
	if t.CAHash == "" {
		return t.Secret
	}
	return tokenPrefix + t.CAHash + "::" + t.Secret
}

// Pinned returns the token pinned to the CA certificate caPEM.
func (t Token) Pinned(caPEM []byte) (Token, error) {
	hash, err := CAHash(caPEM)
	if err != nil {
		return Token{}, err
	}
	return Token{CAHash: hash, Secret: t.Secret}, nil
}

// SecretMatches says, in constant time, whether secret is the token's.
func (t Token) SecretMatches(secret string) bool {
	return subtle.ConstantTimeCompare([]byte(t.Secret), []byte(secret)) == 1
}

// CAHash is the hex SHA-256 of the DER bytes of the PEM certificate caPEM.
func CAHash(caPEM []byte) (string, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", errors.New("CA: no PEM certificate")
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return "", fmt.Errorf("CA: %w", err)
	}
	sum := sha256.Sum256(block.Bytes)
	return hex.EncodeToString(sum[:]), nil
}

// TokenPath is the file in a server's data directory that holds its join
// token, like k3s's node-token.
func TokenPath(dataDir string) string { return filepath.Join(dataDir, "token") }

// MinSecretLength is the shortest secret a first server accepts as
// --token: a random secret of that many hexadecimal digits holds 64 bits.
const MinSecretLength = 16

// EnsureToken returns the token of the server with data directory dataDir
// and CA caPEM: given (as a flag) it must agree with the stored one, if
// any, and is stored; not given, the stored one, or a new random secret.
// The stored token is pinned to caPEM, mode 0600. A given token pinned to
// another CA is refused: it was made for another cluster; so is a new
// secret shorter than MinSecretLength.
func EnsureToken(dataDir, given string, caPEM []byte) (Token, error) {
	var tok Token
	if given != "" {
		t, err := ParseToken(given)
		if err != nil {
			return Token{}, err
		}
		tok = t
	}
	path := TokenPath(dataDir)
	if data, err := os.ReadFile(path); err == nil {
		stored, err := ParseToken(string(data))
		if err != nil {
			return Token{}, fmt.Errorf("%s: %w; remove it to have a new token made, or pass --token", path, err)
		}
		if given != "" && !stored.SecretMatches(tok.Secret) {
			return Token{}, fmt.Errorf("--token differs from the token in %s that this cluster uses; pass that one, or leave --token out", path)
		}
		tok.Secret = stored.Secret
	} else if !errors.Is(err, os.ErrNotExist) {
		return Token{}, err
	} else if given != "" && len(tok.Secret) < MinSecretLength {
		return Token{}, fmt.Errorf("--token: the secret is %d characters long; it must be at least %d random characters "+
			"(anyone who reaches the server may try to guess it offline), such as the output of 'openssl rand -hex 16', "+
			"or leave --token out to have one made", len(tok.Secret), MinSecretLength)
	}
	if tok.Secret == "" {
		tok.Secret = newSecret()
	}
	pinned, err := tok.Pinned(caPEM)
	if err != nil {
		return Token{}, err
	}
	if tok.CAHash != "" && tok.CAHash != pinned.CAHash {
		return Token{}, errors.New("--token pins another CA than this server's: it belongs to another cluster; pass the bare secret or this cluster's token")
	}
	if err := pki.WriteFileAtomic(path, []byte(pinned.String()+"\n"), 0o600); err != nil {
		return Token{}, err
	}
	return pinned, nil
}

func newSecret() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}
