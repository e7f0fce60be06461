package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
)

const testIssuer = "https://kubernetes.default.svc.cluster.local"

// objects is a Getter over a fixed set of objects.
type objects struct {
	accounts map[string]*corev1.ServiceAccount
	pods     map[string]*corev1.Pod
}

func (o objects) GetServiceAccount(ns, name string) (*corev1.ServiceAccount, error) {
	if sa, ok := o.accounts[ns+"/"+name]; ok {
		return sa, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
}

func (o objects) GetPod(ns, name string) (*corev1.Pod, error) {
	if p, ok := o.pods[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

func (o objects) GetSecret(ns, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func (o objects) GetNode(name string) (*corev1.Node, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
}

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestAuthenticateToken(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	key, otherKey := rsaKey(t), rsaKey(t)
	issuer, err := NewIssuer(testIssuer, key, clock)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewIssuer(testIssuer, otherKey, clock)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := NewIssuer("https://elsewhere.example", key, clock)
	if err != nil {
		t.Fatal(err)
	}
	live := objects{
		accounts: map[string]*corev1.ServiceAccount{"ns/app": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "sa-uid"}}},
		pods:     map[string]*corev1.Pod{"ns/web": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-uid"}}},
	}
	bound := Request{Namespace: "ns", ServiceAccount: Ref{Name: "app", UID: "sa-uid"}, Pod: &Ref{Name: "web", UID: "pod-uid"},
		Audiences: []string{testIssuer}, Expiration: time.Hour}
	with := func(f func(r *Request)) Request {
		r := bound
		f(&r)
		return r
	}
	sign := func(i *Issuer, r Request) string {
		tok, _, err := i.Issue(r)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	terminating := objects{accounts: live.accounts, pods: map[string]*corev1.Pod{"ns/web": {ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "web", UID: "pod-uid", DeletionTimestamp: &metav1.Time{Time: now.Add(-2 * time.Minute)}}}}}

	for _, tc := range []struct {
		name    string
		token   string
		getter  Getter
		at      time.Duration // after issuing
		reqAuds []string      // the request's audiences (a TokenReview's spec.audiences)
		wantErr string        // "" with wantOK false: not this authenticator's token
		wantOK  bool
		wantPod bool // the user carries the pod's name and uid
	}{
		{name: "bound token", token: sign(issuer, bound), getter: live, wantOK: true, wantPod: true},
		{name: "unbound token", token: sign(issuer, with(func(r *Request) { r.Pod = nil })), getter: live, wantOK: true},
		{name: "near expiry", token: sign(issuer, bound), getter: live, at: 59 * time.Minute, wantOK: true, wantPod: true},
		{name: "not a JWT", token: "abc.def", getter: live},
		{name: "garbage in three parts", token: "a.b.c", getter: live},
		{name: "other issuer", token: sign(foreign, bound), getter: live},
		{name: "signature by another key", token: sign(other, bound), getter: live, wantErr: "signature is not valid"},
		{name: "tampered payload", token: tamper(t, sign(issuer, bound)), getter: live, wantErr: "signature is not valid"},
		{name: "expired", token: sign(issuer, bound), getter: live, at: 2 * time.Hour, wantErr: "has expired"},
		{name: "wrong audience", token: sign(issuer, with(func(r *Request) { r.Audiences = []string{"vault"} })), getter: live, wantErr: "audiences"},
		{name: "audience the review asks for", token: sign(issuer, with(func(r *Request) { r.Audiences = []string{"vault"} })), getter: live,
			reqAuds: []string{"vault"}, wantOK: true, wantPod: true},
		{name: "API token, review asks for another audience", token: sign(issuer, bound), getter: live,
			reqAuds: []string{"vault"}, wantErr: `audiences ["https://`},
		{name: "deleted pod", token: sign(issuer, bound), getter: objects{accounts: live.accounts}, wantErr: "pod ns/web has been deleted"},
		{name: "recreated pod", token: sign(issuer, with(func(r *Request) { r.Pod = &Ref{Name: "web", UID: "old"} })), getter: live, wantErr: "pod ns/web has been deleted or recreated"},
		{name: "pod deleted past its grace", token: sign(issuer, bound), getter: terminating, wantErr: "pod ns/web has been deleted"},
		{name: "deleted service account", token: sign(issuer, bound), getter: objects{pods: live.pods}, wantErr: "service account ns/app has been deleted"},
		{name: "recreated service account", token: sign(issuer, with(func(r *Request) { r.ServiceAccount.UID = "old" })), getter: live, wantErr: "service account ns/app has been deleted or recreated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Authenticator{Issuer: testIssuer, Keys: []crypto.PublicKey{key.Public()}, Audiences: []string{testIssuer},
				Getter: tc.getter, Now: func() time.Time { return now.Add(tc.at) }}
			ctx := context.Background()
			if tc.reqAuds != nil {
				ctx = authenticator.WithAudiences(ctx, tc.reqAuds)
			}
			resp, ok, err := a.AuthenticateToken(ctx, tc.token)
			if ok != tc.wantOK {
				t.Fatalf("ok: got %v, want %v (err %v)", ok, tc.wantOK, err)
			}
			if tc.wantErr == "" && err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one saying %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), tc.token) || strings.Contains(err.Error(), strings.Split(tc.token, ".")[2]) {
					t.Fatalf("error %q quotes the token", err)
				}
			}
			if !ok {
				return
			}
			checkUser(t, resp, tc.wantPod)
		})
	}
}

// checkUser checks the user a valid token of ns/app authenticates as.
func checkUser(t *testing.T, resp *authenticator.Response, wantPod bool) {
	t.Helper()
	u := resp.User
	if got, want := u.GetName(), "system:serviceaccount:ns:app"; got != want {
		t.Errorf("user: got %q, want %q", got, want)
	}
	if got, want := u.GetUID(), "sa-uid"; got != want {
		t.Errorf("uid: got %q, want %q", got, want)
	}
	if diff := cmp.Diff([]string{"system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"}, u.GetGroups()); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	extra := u.GetExtra()
	if len(extra[ExtraCredentialID]) != 1 || !strings.HasPrefix(extra[ExtraCredentialID][0], "JTI=") {
		t.Errorf("credential id: got %v, want JTI=...", extra[ExtraCredentialID])
	}
	var pod []string
	if wantPod {
		pod = []string{"web"}
	}
	if diff := cmp.Diff(pod, extra[ExtraPodName]); diff != "" {
		t.Errorf("pod-name extra (-want +got):\n%s", diff)
	}
}

// tamper swaps the payload of token for one naming another account.
func tamper(t *testing.T, token string) string {
	parts := strings.Split(token, ".")
	other, err := NewIssuer(testIssuer, rsaKey(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	forged, _, err := other.Issue(Request{Namespace: "kube-system", ServiceAccount: Ref{Name: "admin", UID: types.UID("x")},
		Audiences: []string{testIssuer}, Expiration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return parts[0] + "." + strings.Split(forged, ".")[1] + "." + parts[2]
}

// TestSigningKey checks the key is created once, 0600, and loaded again.
func TestSigningKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pki", "sa.key")
	k1, err := LoadOrCreateSigningKey(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadOrCreateSigningKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Public().(*rsa.PublicKey).Equal(k2.Public()) {
		t.Errorf("second load made a new key")
	}
	st, err := statMode(path)
	if err != nil {
		t.Fatal(err)
	}
	if st != 0o600 {
		t.Errorf("key file mode: got %o, want 600", st)
	}
}

// TestECDSAKey checks an ECDSA signing key works end to end.
func TestECDSAKey(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := NewIssuer(testIssuer, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := iss.Issue(Request{Namespace: "ns", ServiceAccount: Ref{Name: "app", UID: "sa-uid"}, Audiences: []string{testIssuer}, Expiration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	a := &Authenticator{Issuer: testIssuer, Keys: []crypto.PublicKey{key.Public()}, Audiences: []string{testIssuer},
		Getter: objects{accounts: map[string]*corev1.ServiceAccount{"ns/app": {ObjectMeta: metav1.ObjectMeta{Name: "app", UID: "sa-uid"}}}}}
	if _, ok, err := a.AuthenticateToken(context.Background(), tok); !ok || err != nil {
		t.Fatalf("got ok %v err %v, want ok", ok, err)
	}
}
