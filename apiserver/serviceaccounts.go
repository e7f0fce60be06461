package apiserver

import (
	"context"
	"crypto"
	"fmt"
	"net/url"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"portal.dev/portal/apiserver/auth/serviceaccount"
)

// DefaultServiceAccountIssuer is the iss of the tokens the API server
// issues unless --service-account-issuer says otherwise: the in-cluster
// name of the API, as upstream recommends.
const DefaultServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// ServiceAccountKeyPath is where the server keeps the key it signs
// ServiceAccount tokens with, unless --service-account-signing-key-file
// names another.
func ServiceAccountKeyPath(dataDir string) string { return filepath.Join(dataDir, "pki", "sa.key") }

// serviceAccounts is what the API server needs for ServiceAccount tokens:
// the issuer behind TokenRequest, the authenticator and the discovery
// documents.
type serviceAccounts struct {
	issuer        *serviceaccount.Issuer
	authenticator *serviceaccount.Authenticator
	discovery     *serviceaccount.Discovery
	audiences     []string
}

// newServiceAccounts loads (or creates) the signing key and builds the
// token issuer, an authenticator that reads the bound objects from
// factory's caches, and the OIDC discovery documents.
func newServiceAccounts(o Options, externalAddress string, factory informers.SharedInformerFactory, client kubernetes.Interface) (*serviceAccounts, error) {
	keyFile := o.ServiceAccountSigningKeyFile
	var key crypto.Signer
	var err error
	if keyFile == "" {
		key, err = serviceaccount.LoadOrCreateSigningKey(ServiceAccountKeyPath(o.DataDir))
	} else {
		key, err = serviceaccount.LoadSigningKey(keyFile)
	}
	if err != nil {
		return nil, fmt.Errorf("service account signing key: %w", err)
	}
	keys := []crypto.PublicKey{key.Public()}
	for _, f := range o.ServiceAccountKeyFiles {
		more, err := serviceaccount.LoadPublicKeys(f)
		if err != nil {
			return nil, fmt.Errorf("--service-account-key-file: %w", err)
		}
		keys = append(keys, more...)
	}
	issuerURL := o.ServiceAccountIssuer
	if issuerURL == "" {
		issuerURL = DefaultServiceAccountIssuer
	}
	audiences := o.APIAudiences
	if len(audiences) == 0 {
		audiences = []string{issuerURL}
	}
	issuer, err := serviceaccount.NewIssuer(issuerURL, key, nil)
	if err != nil {
		return nil, err
	}
	// Upstream publishes the key set at the API's external address, which
	// verifiers outside the cluster can reach, unlike the issuer's name.
	jwksURI := (&url.URL{Scheme: "https", Host: externalAddress, Path: serviceaccount.JWKSPath}).String()
	discovery, err := serviceaccount.NewDiscovery(issuerURL, jwksURI, keys)
	if err != nil {
		return nil, err
	}
	return &serviceAccounts{
		issuer: issuer,
		authenticator: &serviceaccount.Authenticator{
			Issuer: issuerURL, Keys: keys, Audiences: audiences, Getter: newTokenObjects(factory, client),
		},
		discovery: discovery,
		audiences: audiences,
	}, nil
}

// authenticate puts the token authenticator in front of c's others. It
// answers only JWTs of its issuer, so the order does not change who
// other credentials authenticate as.
func (s *serviceAccounts) authenticate(c *genericapiserver.Config) {
	c.Authentication.APIAudiences = authenticator.Audiences(s.audiences)
	c.Authentication.Authenticator = union.New(bearertoken.New(s.authenticator), c.Authentication.Authenticator)
}

// installDiscovery serves the OIDC documents. Who may read them is the
// authorizer's business (upstream grants system:serviceaccounts).
func (s *serviceAccounts) installDiscovery(server *genericapiserver.GenericAPIServer) {
	server.Handler.NonGoRestfulMux.Handle(serviceaccount.OpenIDConfigurationPath, s.discovery.ConfigurationHandler())
	server.Handler.NonGoRestfulMux.Handle(serviceaccount.JWKSPath, s.discovery.JWKSHandler())
}

// tokenObjects answers the authenticator from informer caches. An object
// the cache lacks is asked for once through the API, as upstream does: a
// token issued for a pod created a moment ago must not fail because the
// cache has not seen the pod yet.
type tokenObjects struct {
	accounts corelisters.ServiceAccountLister
	pods     corelisters.PodLister
	secrets  corelisters.SecretLister
	nodes    corelisters.NodeLister
	client   kubernetes.Interface
}

func newTokenObjects(f informers.SharedInformerFactory, client kubernetes.Interface) *tokenObjects {
	core := f.Core().V1()
	return &tokenObjects{
		accounts: core.ServiceAccounts().Lister(), pods: core.Pods().Lister(),
		secrets: core.Secrets().Lister(), nodes: core.Nodes().Lister(),
		client: client,
	}
}

func (t *tokenObjects) GetServiceAccount(ns, name string) (*corev1.ServiceAccount, error) {
	sa, err := t.accounts.ServiceAccounts(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return t.client.CoreV1().ServiceAccounts(ns).Get(context.TODO(), name, metav1.GetOptions{})
	}
	return sa, err
}

func (t *tokenObjects) GetPod(ns, name string) (*corev1.Pod, error) {
	pod, err := t.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return t.client.CoreV1().Pods(ns).Get(context.TODO(), name, metav1.GetOptions{})
	}
	return pod, err
}

func (t *tokenObjects) GetSecret(ns, name string) (*corev1.Secret, error) {
	s, err := t.secrets.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return t.client.CoreV1().Secrets(ns).Get(context.TODO(), name, metav1.GetOptions{})
	}
	return s, err
}

func (t *tokenObjects) GetNode(name string) (*corev1.Node, error) {
	n, err := t.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return t.client.CoreV1().Nodes().Get(context.TODO(), name, metav1.GetOptions{})
	}
	return n, err
}
