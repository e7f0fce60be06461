// Package serviceaccount issues and checks the bound ServiceAccount tokens
// of the TokenRequest API, as kube-apiserver does: JWTs signed by one key
// of the API server, naming a ServiceAccount and, when bound, the Pod they
// were issued for, with audiences and an expiry.
//
// Keys (key.go) are PEM files; the signing key is created on first start
// with mode 0600. Issuing (issuer.go) is pure: claims in, compact JWT out.
// The Authenticator (authenticator.go) checks signature, issuer, audience
// and expiry, then that the ServiceAccount and Pod it names still exist
// with the same UIDs, reading them through a Getter that answers from
// informer caches. Discovery (discovery.go) serves the OIDC documents that
// let others verify the tokens.
//
// Nothing here logs or returns a token in an error: a log line that held
// one would hand out a credential.
package serviceaccount
