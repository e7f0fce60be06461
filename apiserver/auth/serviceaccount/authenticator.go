package serviceaccount

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Extra keys of an authenticated ServiceAccount, as upstream's.
const (
	ExtraPodName      = "authentication.kubernetes.io/pod-name"
	ExtraPodUID       = "authentication.kubernetes.io/pod-uid"
	ExtraNodeName     = "authentication.kubernetes.io/node-name"
	ExtraNodeUID      = "authentication.kubernetes.io/node-uid"
	ExtraCredentialID = "authentication.kubernetes.io/credential-id"
)

// leeway is how far the clocks of issuer and checker may differ: go-jose's
// default, which upstream also uses.
const leeway = jwt.DefaultLeeway

// deletedPodGrace is how long after a pod's deletion deadline its tokens
// still work, as upstream: a pod shutting down may still call the API.
const deletedPodGrace = 60 * time.Second

// Getter finds the objects a token is bound to. Its answers should come
// from informer caches, not from storage on every request; an object that
// does not exist is an error for which apierrors.IsNotFound holds.
type Getter interface {
	GetServiceAccount(namespace, name string) (*corev1.ServiceAccount, error)
	GetPod(namespace, name string) (*corev1.Pod, error)
	GetSecret(namespace, name string) (*corev1.Secret, error)
	GetNode(name string) (*corev1.Node, error)
}

// Authenticator accepts the tokens an Issuer of the same URL signed with
// one of Keys, for one of Audiences.
type Authenticator struct {
	// Issuer is the iss a token must carry; tokens of other issuers are
	// left to the other authenticators.
	Issuer string
	// Keys are the public keys a signature may verify with.
	Keys []crypto.PublicKey
	// Audiences are the API's: a token must name at least one.
	Audiences []string
	Getter    Getter
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// kids are the key IDs of Keys, worked out once: a request should not
	// pay for encoding the keys again.
	kidsOnce sync.Once
	kids     map[string]crypto.PublicKey
}

// AuthenticateToken checks token as a bound ServiceAccount token. A token
// that is not a JWT of this issuer is not answered (false, no error);
// one that is but fails a check is an error that says why without
// quoting the token.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	if !a.hasIssuer(token) {
		return nil, false, nil
	}
	tok, err := jwt.ParseSigned(token, allowedAlgorithms)
	if err != nil {
		return nil, false, errors.New("service account token is malformed")
	}
	var claims jwt.Claims
	var private privateClaims
	if err := a.verify(tok, &claims, &private); err != nil {
		return nil, false, err
	}
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: a.Issuer, Time: now}, leeway); err != nil {
		if errors.Is(err, jwt.ErrExpired) {
			return nil, false, errors.New("service account token has expired")
		}
		return nil, false, fmt.Errorf("service account token is not valid: %w", err)
	}
	// A TokenReview with spec.audiences asks for those audiences instead
	// of the API's, as upstream's JWT authenticator does.
	want := a.Audiences
	if reqAuds, ok := authenticator.AudiencesFrom(ctx); ok && len(reqAuds) > 0 {
		want = reqAuds
	}
	auds := audiencesIn(want, claims.Audience)
	if len(auds) == 0 {
		return nil, false, fmt.Errorf("service account token audiences %q are none of %q", []string(claims.Audience), want)
	}
	u, err := a.userFor(&claims, &private.Kubernetes, now)
	if err != nil {
		return nil, false, err
	}
	return &authenticator.Response{User: u, Audiences: auds}, true, nil
}

var allowedAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512}

// hasIssuer peeks at the unverified payload for the iss claim, so that
// other JWTs (and tokens that are no JWT at all) are not ours to refuse.
func (a *Authenticator) hasIssuer(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	return json.Unmarshal(payload, &c) == nil && c.Issuer == a.Issuer
}

// verify checks the signature against the key the kid names, or every key
// when the token names none of them.
func (a *Authenticator) verify(tok *jwt.JSONWebToken, dest ...any) error {
	a.kidsOnce.Do(func() {
		a.kids = map[string]crypto.PublicKey{}
		for _, k := range a.Keys {
			if id, err := keyID(k); err == nil {
				a.kids[id] = k
			}
		}
	})
	keys := a.Keys
	if len(tok.Headers) == 1 {
		if k, ok := a.kids[tok.Headers[0].KeyID]; ok {
			keys = []crypto.PublicKey{k}
		}
	}
	for _, k := range keys {
		if err := tok.Claims(k, dest...); err == nil {
			return nil
		}
	}
	return errors.New("service account token signature is not valid")
}

func audiencesIn(api []string, token jwt.Audience) []string {
	var out []string
	for _, a := range api {
		if token.Contains(a) {
			out = append(out, a)
		}
	}
	return out
}

// userFor checks that the objects the token names still exist as they
// were, and returns the ServiceAccount's user.
func (a *Authenticator) userFor(claims *jwt.Claims, k *kubernetesClaims, now time.Time) (*user.DefaultInfo, error) {
	if k.Namespace == "" || k.ServiceAccount.Name == "" || claims.Subject != UserName(k.Namespace, k.ServiceAccount.Name) {
		return nil, errors.New("service account token names no service account")
	}
	sa, err := a.Getter.GetServiceAccount(k.Namespace, k.ServiceAccount.Name)
	if err := gone(err, "service account", k.Namespace, k.ServiceAccount.Name); err != nil {
		return nil, err
	}
	if sa.DeletionTimestamp != nil || sa.UID != k.ServiceAccount.UID {
		return nil, fmt.Errorf("service account %s/%s has been deleted or recreated", k.Namespace, k.ServiceAccount.Name)
	}
	u := &user.DefaultInfo{
		Name: UserName(k.Namespace, sa.Name), UID: string(sa.UID), Groups: Groups(k.Namespace),
		Extra: map[string][]string{},
	}
	if claims.ID != "" {
		u.Extra[ExtraCredentialID] = []string{"JTI=" + claims.ID}
	}
	if err := a.checkPod(k, now, u); err != nil {
		return nil, err
	}
	if err := a.checkSecret(k); err != nil {
		return nil, err
	}
	if err := a.checkNode(k, u); err != nil {
		return nil, err
	}
	return u, nil
}

func (a *Authenticator) checkPod(k *kubernetesClaims, now time.Time, u *user.DefaultInfo) error {
	if k.Pod == nil {
		return nil
	}
	pod, err := a.Getter.GetPod(k.Namespace, k.Pod.Name)
	if err := gone(err, "pod", k.Namespace, k.Pod.Name); err != nil {
		return err
	}
	if pod.UID != k.Pod.UID {
		return fmt.Errorf("pod %s/%s has been deleted or recreated", k.Namespace, k.Pod.Name)
	}
	if pod.DeletionTimestamp != nil && pod.DeletionTimestamp.Add(deletedPodGrace).Before(now) {
		return fmt.Errorf("pod %s/%s has been deleted", k.Namespace, k.Pod.Name)
	}
	u.Extra[ExtraPodName] = []string{pod.Name}
	u.Extra[ExtraPodUID] = []string{string(pod.UID)}
	return nil
}

func (a *Authenticator) checkSecret(k *kubernetesClaims) error {
	if k.Secret == nil {
		return nil
	}
	s, err := a.Getter.GetSecret(k.Namespace, k.Secret.Name)
	if err := gone(err, "secret", k.Namespace, k.Secret.Name); err != nil {
		return err
	}
	if s.UID != k.Secret.UID || s.DeletionTimestamp != nil {
		return fmt.Errorf("secret %s/%s has been deleted or recreated", k.Namespace, k.Secret.Name)
	}
	return nil
}

func (a *Authenticator) checkNode(k *kubernetesClaims, u *user.DefaultInfo) error {
	if k.Node == nil {
		return nil
	}
	n, err := a.Getter.GetNode(k.Node.Name)
	if err := gone(err, "node", "", k.Node.Name); err != nil {
		return err
	}
	if n.UID != k.Node.UID || n.DeletionTimestamp != nil {
		return fmt.Errorf("node %s has been deleted or recreated", k.Node.Name)
	}
	u.Extra[ExtraNodeName] = []string{n.Name}
	u.Extra[ExtraNodeUID] = []string{string(n.UID)}
	return nil
}

// gone turns a lookup failure into the error the token is refused with.
func gone(err error, kind, namespace, name string) error {
	if err == nil {
		return nil
	}
	ref := name
	if namespace != "" {
		ref = namespace + "/" + name
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s has been deleted", kind, ref)
	}
	return fmt.Errorf("look up %s %s: %w", kind, ref, err)
}

var _ authenticator.Token = &Authenticator{}
