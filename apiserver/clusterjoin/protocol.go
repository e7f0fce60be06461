package clusterjoin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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
	ID       uint64   `json:"id"`
	Name     string   `json:"name"`
	PeerURLs []string `json:"peerURLs"`
	Learner  bool     `json:"learner,omitempty"`
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

// proof is the HMAC-SHA256, keyed with the secret, of the nonce the
// joiner chose and the CA certificate the server sends: only a server that
// knows the secret can make it, and only for this CA and this request.
func proof(secret, nonce string, ca []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("portal-join-ca\x00" + nonce + "\x00"))
	m.Write(ca)
	return hex.EncodeToString(m.Sum(nil))
}
