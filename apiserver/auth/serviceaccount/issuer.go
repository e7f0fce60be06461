package serviceaccount

import (
	"crypto"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/types"
)

// Upstream's bounds and defaults for TokenRequest's expirationSeconds.
const (
	// MinExpiration is the shortest lifetime a token may be asked for.
	MinExpiration = 10 * time.Minute
	// DefaultExpiration is the lifetime of a token asked for without one.
	DefaultExpiration = time.Hour
	// MaxExpiration is the longest lifetime the API accepts (2^32 s).
	MaxExpiration = (1 << 32) * time.Second
)

// Ref names an object a token is bound to.
type Ref struct {
	Name string    `json:"name,omitempty"`
	UID  types.UID `json:"uid,omitempty"`
}

// Request is what a token is issued for: a ServiceAccount, optionally
// bound to one Pod, Secret or Node, for Audiences until Expiration has
// passed.
type Request struct {
	Namespace      string
	ServiceAccount Ref
	Pod            *Ref
	Secret         *Ref
	Node           *Ref
	Audiences      []string
	Expiration     time.Duration
}

// privateClaims is upstream's "kubernetes.io" claim, so that tools which
// read Kubernetes tokens read Portal's.
type privateClaims struct {
	Kubernetes kubernetesClaims `json:"kubernetes.io"`
}

type kubernetesClaims struct {
	Namespace      string `json:"namespace,omitempty"`
	ServiceAccount Ref    `json:"serviceaccount"`
	Pod            *Ref   `json:"pod,omitempty"`
	Secret         *Ref   `json:"secret,omitempty"`
	Node           *Ref   `json:"node,omitempty"`
}

// Issuer signs tokens with one key under one issuer URL.
type Issuer struct {
	url    string
	signer jose.Signer
	now    func() time.Time
}

// NewIssuer returns an Issuer that signs with key and names url as the
// tokens' iss. now is the clock; nil means time.Now.
func NewIssuer(url string, key crypto.Signer, now func() time.Time) (*Issuer, error) {
	alg, err := algorithm(key.Public())
	if err != nil {
		return nil, err
	}
	kid, err := keyID(key.Public())
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Issuer{url: url, signer: signer, now: now}, nil
}

// Issue returns a signed token for r and the time it expires.
func (i *Issuer) Issue(r Request) (string, time.Time, error) {
	if r.Namespace == "" || r.ServiceAccount.Name == "" {
		return "", time.Time{}, fmt.Errorf("a token needs a namespace and a service account")
	}
	now := i.now()
	exp := now.Add(r.Expiration)
	claims := jwt.Claims{
		Issuer:    i.url,
		Subject:   UserName(r.Namespace, r.ServiceAccount.Name),
		Audience:  jwt.Audience(r.Audiences),
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		Expiry:    jwt.NewNumericDate(exp),
		ID:        uuid.NewString(),
	}
	private := privateClaims{Kubernetes: kubernetesClaims{
		Namespace: r.Namespace, ServiceAccount: r.ServiceAccount,
		Pod: r.Pod, Secret: r.Secret, Node: r.Node,
	}}
	token, err := jwt.Signed(i.signer).Claims(claims).Claims(private).Serialize()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign service account token: %w", err)
	}
	return token, exp.Truncate(time.Second), nil
}

// UserName is the user a ServiceAccount authenticates as.
func UserName(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// Groups are the groups of a ServiceAccount of namespace, as upstream's,
// with system:authenticated, which every authenticated user holds.
func Groups(namespace string) []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}
