package clusterjoin

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// The endpoints a server answers joins on. They sit in front of the API's
// own authentication: a joiner has no credential of the cluster yet, only
// the token.
const (
	// CACertsPath serves the cluster CA certificate to anyone, with a
	// proof that the server knows the token's secret (see proof).
	CACertsPath = "/portal/cluster/cacerts"
	// JoinPath serves, to a bearer of the token's secret, what every
	// server shares, and adds the joiner to etcd as a learner when asked.
	JoinPath = "/portal/cluster/join"
)

// CACerts is the answer on CACertsPath.
type CACerts struct {
	// CA is the cluster CA certificate, PEM.
	CA []byte `json:"ca"`
	// Proof is proof(secret, nonce, CA): a joiner whose token carries no
	// CA hash trusts CA only once it checks.
	Proof string `json:"proof"`
}

// Request is the body of a POST on JoinPath.
type Request struct {
	// Name is the joiner's member name (its node name).
	Name string `json:"name"`
	// PeerURL is where the joiner's etcd listens for its peers.
	PeerURL string `json:"peerURL"`
	// Add asks the server to add the joiner to etcd as a learner; without
	// it the server only answers, and changes nothing.
	Add bool `json:"add"`
}

// Member is one etcd member.
type Member struct {
	// ID is etcd's member ID.
	ID uint64 `json:"id"`
	// Name is the member's name, the node name of its server; empty
	// until the member has started.
	Name string `json:"name"`
	// PeerURLs are the URLs the other members reach it on.
	PeerURLs []string `json:"peerURLs"`
	// Learner says the member is a learner, not yet a voting member.
	Learner bool `json:"learner,omitempty"`
}

// Bundle is the answer on JoinPath: what every server of the cluster must
// share, and the etcd cluster the joiner joins.
type Bundle struct {
	// ClusterID is the etcd cluster's ID.
	ClusterID uint64 `json:"clusterID"`
	// Members are the etcd members, the joiner among them once added.
	Members []Member `json:"members"`
	// MemberID is the joiner's member ID when it was added.
	MemberID uint64 `json:"memberID,omitempty"`
	// Files are the shared files by their path in the data directory: the
	// cluster CA and the etcd CA (certificates and keys) and the service
	// account signing key.
	Files map[string][]byte `json:"files"`
	// EncryptionConfig is the server's EncryptionConfiguration, if it has
	// one: every server must read what the others write.
	EncryptionConfig []byte `json:"encryptionConfig,omitempty"`
}

// proof is the HMAC-SHA256 of the nonce the joiner chose and the CA
// certificate the server sends, keyed with proofKey(secret, CA): only a
// server that knows the secret can make it, and only for this CA and this
// request.
func proof(secret, nonce string, ca []byte) string {
	m := hmac.New(sha256.New, proofKey(secret, ca))
	m.Write([]byte("portal-join-ca\x00" + nonce + "\x00"))
	m.Write(ca)
	return hex.EncodeToString(m.Sum(nil))
}

// proofKeyIterations is the PBKDF2-HMAC-SHA256 work factor of proofKey,
// OWASP's recommendation for that hash. Anyone may ask for a proof, so a
// proof is material for guessing the secret offline; each guess then
// costs this many hashes.
const proofKeyIterations = 600_000

// proofKeys holds the keys already derived, by secret and CA, so that a
// server derives its key once however many ask, and an unauthenticated
// request never costs it the work factor.
var proofKeys sync.Map

// proofKey is the key of proof: PBKDF2 of the secret, salted with the
// hash of the CA so that a guess is worth one cluster only.
func proofKey(secret string, ca []byte) []byte {
	salt := sha256.Sum256(append([]byte("portal-join-ca-key\x00"), ca...))
	id := secret + "\x00" + string(salt[:])
	if k, ok := proofKeys.Load(id); ok {
		return k.([]byte)
	}
	k, err := pbkdf2.Key(sha256.New, secret, salt[:], proofKeyIterations, sha256.Size)
	if err != nil {
		// Only FIPS 140-3 mode refuses these parameters (a secret
		// shorter than 14 bytes). A random key matches no other side's,
		// so the joiner refuses the CA: safe, and the join fails.
		k = make([]byte, sha256.Size)
		rand.Read(k)
	}
	proofKeys.Store(id, k)
	return k
}
