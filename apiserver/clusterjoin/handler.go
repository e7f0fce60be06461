package clusterjoin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/klog/v2"
)

// Membership is the etcd cluster as the join endpoint sees it.
type Membership interface {
	// Members returns the cluster's ID and its members.
	Members(ctx context.Context) (uint64, []Member, error)
	// AddLearner adds a learner member with the peer URL and returns its
	// ID and the members afterwards.
	AddLearner(ctx context.Context, peerURL string) (uint64, []Member, error)
}

// HandlerConfig is what a server's join endpoints serve.
type HandlerConfig struct {
	// Token is the cluster's join token.
	Token Token
	// DataDir holds the files in SharedFiles.
	DataDir string
	// ServiceAccountKey is the path of the service account signing key.
	ServiceAccountKey string
	// EncryptionConfig is the path of the EncryptionConfiguration, if any.
	EncryptionConfig string
	// Etcd changes and reads the membership.
	Etcd Membership
}

// SharedFiles are the files, by their path in the data directory, that
// every server of a cluster has the same: the cluster CA and the etcd CA.
var SharedFiles = []string{"pki/ca.crt", "pki/ca.key", "pki/etcd/ca.crt", "pki/etcd/ca.key"}

// ServiceAccountKeyFile is the name under which a bundle carries the
// service account signing key.
const ServiceAccountKeyFile = "service-account.key"

// Handler answers on CACertsPath and JoinPath.
func Handler(c HandlerConfig) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+CACertsPath, c.serveCACerts)
	mux.HandleFunc("POST "+JoinPath, c.serveJoin)
	return mux
}

func (c HandlerConfig) serveCACerts(w http.ResponseWriter, r *http.Request) {
	ca, err := os.ReadFile(filepath.Join(c.DataDir, "pki", "ca.crt"))
	if err != nil {
		http.Error(w, "cluster CA unreadable", http.StatusInternalServerError)
		return
	}
	nonce := r.URL.Query().Get("nonce")
	if len(nonce) < 16 || len(nonce) > 128 {
		http.Error(w, "nonce: want 16 to 128 characters", http.StatusBadRequest)
		return
	}
	writeJSON(w, CACerts{CA: ca, Proof: proof(c.Token.Secret, nonce, ca)})
}

func (c HandlerConfig) serveJoin(w http.ResponseWriter, r *http.Request) {
	secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !c.Token.SecretMatches(secret) {
		klog.InfoS("Join refused: wrong token", "remote", r.RemoteAddr)
		http.Error(w, "join token rejected", http.StatusUnauthorized)
		return
	}
	var req Request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || req.Name == "" || req.PeerURL == "" {
		http.Error(w, "want a JSON body with name and peerURL", http.StatusBadRequest)
		return
	}
	b, err := c.bundle(r.Context(), req)
	var conflict *ConflictError
	switch {
	case errors.As(err, &conflict):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case err != nil:
		klog.ErrorS(err, "Join failed", "member", req.Name)
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if req.Add {
		klog.InfoS("Added an etcd learner", "member", req.Name, "peerURL", req.PeerURL, "id", fmt.Sprintf("%x", b.MemberID))
	}
	writeJSON(w, b)
}

// ConflictError is a join the cluster refuses as it stands: the name or
// peer URL is another member's, or a learner that never started blocks it.
type ConflictError struct {
	// Msg says why, and what to do.
	Msg string
}

// Error returns the refusal's message, which says what to do.
func (e *ConflictError) Error() string { return e.Msg }

func (c HandlerConfig) bundle(ctx context.Context, req Request) (*Bundle, error) {
	b := &Bundle{Files: map[string][]byte{}}
	for _, f := range SharedFiles {
		data, err := os.ReadFile(filepath.Join(c.DataDir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		b.Files[f] = data
	}
	key, err := os.ReadFile(c.ServiceAccountKey)
	if err != nil {
		return nil, err
	}
	b.Files[ServiceAccountKeyFile] = key
	if c.EncryptionConfig != "" {
		if b.EncryptionConfig, err = os.ReadFile(c.EncryptionConfig); err != nil {
			return nil, err
		}
	}
	if b.ClusterID, b.Members, err = c.Etcd.Members(ctx); err != nil {
		return nil, fmt.Errorf("etcd members: %w", err)
	}
	if !req.Add {
		return b, nil
	}
	id, err := joinable(b.Members, req)
	if err != nil {
		return nil, err
	}
	if id != 0 {
		// A learner added for this peer URL whose start failed: it may
		// start now.
		b.MemberID = id
		return b, nil
	}
	if m, ok := unstartedLearner(b.Members); ok {
		return nil, c.unstartedLearnerError(m)
	}
	if b.MemberID, b.Members, err = c.Etcd.AddLearner(ctx, req.PeerURL); err != nil {
		return nil, fmt.Errorf("add etcd learner: %w", err)
	}
	return b, nil
}

// joinable checks that req may join the members: no member has its name,
// and none its peer URL, except a member never started (no name yet) on the
// same URL, whose ID it returns.
func joinable(members []Member, req Request) (uint64, error) {
	for _, m := range members {
		if m.Name == req.Name {
			return 0, &ConflictError{Msg: fmt.Sprintf("a member named %q is already in the cluster: give this server another name (--hostname-override), "+
				"or, if it is that member on a machine that lost its data, remove the old member first (portal server --leave on it, or etcdctl member remove %x)", req.Name, m.ID)}
		}
		if slices.Contains(m.PeerURLs, req.PeerURL) {
			if m.Name == "" {
				return m.ID, nil
			}
			return 0, &ConflictError{Msg: fmt.Sprintf("member %q already has the peer URL %s: give this server another address (--advertise-address)", m.Name, req.PeerURL)}
		}
	}
	return 0, nil
}

// unstartedLearner returns a learner that was added but never started (it
// has no name yet). etcd admits one learner at a time, so while it stays
// no other member can be added.
func unstartedLearner(members []Member) (Member, bool) {
	for _, m := range members {
		if m.Learner && m.Name == "" {
			return m, true
		}
	}
	return Member{}, false
}

// unstartedLearnerError says which learner blocks the join and how to
// remove it with etcdctl on this server, whose data directory holds the
// etcd client port and credentials.
func (c HandlerConfig) unstartedLearnerError(m Member) error {
	endpoint := "https://127.0.0.1:<the first port in " + filepath.Join(c.DataDir, "etcd-ports") + ">"
	if data, err := os.ReadFile(filepath.Join(c.DataDir, "etcd-ports")); err == nil {
		var port int
		if _, err := fmt.Sscan(string(data), &port); err == nil {
			endpoint = fmt.Sprintf("https://127.0.0.1:%d", port)
		}
	}
	etcdPKI := filepath.Join(c.DataDir, "pki", "etcd")
	return &ConflictError{Msg: fmt.Sprintf("etcd member %x (peer URL %s) was added for a server that has not started it, and etcd admits one learner at a time: "+
		"start that server again with --join from the same address, or, if it is gone, remove the member on the server you join with "+
		"'etcdctl --endpoints %s --cacert %s --cert %s --key %s member remove %x', then join again",
		m.ID, strings.Join(m.PeerURLs, ","), endpoint, filepath.Join(etcdPKI, "ca.crt"),
		filepath.Join(etcdPKI, "apiserver-client.crt"), filepath.Join(etcdPKI, "apiserver-client.key"), m.ID)}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}
