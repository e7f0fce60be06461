package clusterjoin

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"portal.dev/portal/pki"
)

func TestParseToken(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, in string
		want     Token
		wantErr  bool
	}{
		{name: "bare secret", in: "s3cret", want: Token{Secret: "s3cret"}},
		{name: "pinned", in: "P10" + hash + "::s3cret", want: Token{CAHash: hash, Secret: "s3cret"}},
		{name: "pinned, upper-case hash", in: "P10" + strings.ToUpper(hash) + "::x", want: Token{CAHash: hash, Secret: "x"}},
		{name: "trailing newline of the token file", in: "P10" + hash + "::x\n", want: Token{CAHash: hash, Secret: "x"}},
		{name: "secret with :: but no prefix is bare", in: "a::b", want: Token{Secret: "a::b"}},
		{name: "short hash", in: "P10abcd::x", wantErr: true},
		{name: "no secret", in: "P10" + hash + "::", wantErr: true},
		{name: "empty", in: "  ", wantErr: true},
		{name: "white space", in: "a b", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseToken(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseToken(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("ParseToken(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if err == nil {
				if back, _ := ParseToken(got.String()); back != got {
					t.Errorf("round trip of %q: got %+v, want %+v", got.String(), back, got)
				}
			}
		})
	}
}

func TestEnsureToken(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, "pki"), "ca")
	if err != nil {
		t.Fatal(err)
	}
	first, err := EnsureToken(dir, "", ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if first.CAHash == "" || len(first.Secret) < 32 {
		t.Fatalf("generated token %+v: want a pinned token with a long secret", first)
	}
	fi, err := os.Stat(TokenPath(dir))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v; want mode 0600", err, fi.Mode().Perm())
	}
	again, err := EnsureToken(dir, "", ca.CertPEM)
	if err != nil || again != first {
		t.Fatalf("second start: got %+v, %v; want the stored %+v", again, err, first)
	}
	if got, err := EnsureToken(dir, first.Secret, ca.CertPEM); err != nil || got != first {
		t.Errorf("--token with the stored bare secret: got %+v, %v; want %+v", got, err, first)
	}
	if _, err := EnsureToken(dir, "other", ca.CertPEM); err == nil {
		t.Error("--token differing from the stored one: no error")
	}
	other := Token{CAHash: strings.Repeat("00", 32), Secret: first.Secret}
	if _, err := EnsureToken(t.TempDir(), other.String(), ca.CertPEM); err == nil {
		t.Error("--token pinned to another CA: no error")
	}
	given, err := EnsureToken(t.TempDir(), "a-chosen-long-secret", ca.CertPEM)
	if err != nil || given.Secret != "a-chosen-long-secret" || given.CAHash != first.CAHash {
		t.Errorf("--token chosen on a new server: got %+v, %v", given, err)
	}
	if _, err := EnsureToken(t.TempDir(), "chosen", ca.CertPEM); err == nil || !strings.Contains(err.Error(), "at least 16 random characters") {
		t.Errorf("--token too short to resist guessing: got %v, want an error saying how long it must be", err)
	}
}

// fakeEtcd is a Membership in memory.
type fakeEtcd struct {
	members []Member
	added   int
}

func (f *fakeEtcd) Members(context.Context) (uint64, []Member, error) { return 0xc1, f.members, nil }

func (f *fakeEtcd) AddLearner(_ context.Context, peerURL string) (uint64, []Member, error) {
	f.added++
	id := uint64(100 + f.added)
	f.members = append(f.members, Member{ID: id, PeerURLs: []string{peerURL}, Learner: true})
	return id, f.members, nil
}

// joinServer serves the join endpoints of a server with its own CA and the
// given token, on TLS with a certificate of that CA.
func joinServer(t *testing.T, secret string, etcd *fakeEtcd) (*httptest.Server, []byte) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, "pki"), "ca")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.LoadOrCreateCA(filepath.Join(dir, "pki", "etcd"), "ca"); err != nil {
		t.Fatal(err)
	}
	saKey := filepath.Join(dir, "sa.key")
	os.WriteFile(saKey, []byte("sa key"), 0o600)
	crt, key := filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	if err := ca.EnsureServing(crt, key, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(Handler(HandlerConfig{Token: Token{Secret: secret}, DataDir: dir, ServiceAccountKey: saKey, Etcd: etcd}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, ca.CertPEM
}

func TestJoin(t *testing.T) {
	etcd := &fakeEtcd{members: []Member{{ID: 1, Name: "s1", PeerURLs: []string{"https://10.0.0.1:2380"}}}}
	srv, caPEM := joinServer(t, "right", etcd)
	pinned, _ := Token{Secret: "right"}.Pinned(caPEM)
	otherCA, _ := pki.LoadOrCreateCA(t.TempDir(), "ca")
	wrongPin, _ := Token{Secret: "right"}.Pinned(otherCA.CertPEM)
	for _, tc := range []struct {
		name    string
		token   Token
		req     Request
		wantErr error
		wantAdd int
	}{
		{name: "bare secret, info only", token: Token{Secret: "right"}, req: Request{Name: "s2", PeerURL: "https://10.0.0.2:2380"}},
		{name: "pinned token adds a learner", token: pinned, req: Request{Name: "s2", PeerURL: "https://10.0.0.2:2380", Add: true}, wantAdd: 1},
		{name: "a learner that never started is reused", token: pinned, req: Request{Name: "s2", PeerURL: "https://10.0.0.2:2380", Add: true}, wantAdd: 1},
		{name: "wrong bare secret: the server cannot prove it", token: Token{Secret: "wrong"}, req: Request{Name: "s3", PeerURL: "https://10.0.0.3:2380", Add: true}, wantErr: ErrWrongToken, wantAdd: 1},
		{name: "right pin, wrong secret: the server refuses", token: Token{CAHash: pinned.CAHash, Secret: "wrong"}, req: Request{Name: "s3", PeerURL: "https://10.0.0.3:2380", Add: true}, wantErr: ErrWrongToken, wantAdd: 1},
		{name: "pin of another CA", token: wrongPin, req: Request{Name: "s3", PeerURL: "https://10.0.0.3:2380", Add: true}, wantErr: ErrCAMismatch, wantAdd: 1},
		{name: "name of a member", token: pinned, req: Request{Name: "s1", PeerURL: "https://10.0.0.3:2380", Add: true}, wantErr: ErrConflict, wantAdd: 1},
		{name: "peer URL of a member", token: pinned, req: Request{Name: "s3", PeerURL: "https://10.0.0.1:2380", Add: true}, wantErr: ErrConflict, wantAdd: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{Server: srv.URL, Token: tc.token}
			b, ca, err := c.Join(context.Background(), tc.req)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Join: got error %v, want %v", err, tc.wantErr)
			}
			if etcd.added != tc.wantAdd {
				t.Errorf("learners added: got %d, want %d", etcd.added, tc.wantAdd)
			}
			if err != nil {
				return
			}
			if string(ca) != string(caPEM) || b.ClusterID != 0xc1 {
				t.Errorf("bundle: CA or cluster ID wrong: cluster %x", b.ClusterID)
			}
			for _, f := range append(SharedFiles, ServiceAccountKeyFile) {
				if len(b.Files[f]) == 0 {
					t.Errorf("bundle: no %s", f)
				}
			}
			if tc.req.Add && b.MemberID != 101 {
				t.Errorf("member ID: got %d, want 101", b.MemberID)
			}
		})
	}
}

// TestJoinEndpointNeedsTheSecret: the bundle holds the CA key; no request
// without the token's secret gets it.
func TestJoinEndpointNeedsTheSecret(t *testing.T) {
	etcd := &fakeEtcd{}
	srv, _ := joinServer(t, "right", etcd)
	for _, tc := range []struct{ name, auth string }{
		{"anonymous", ""},
		{"wrong secret", "Bearer wrong"},
		{"basic auth", "Basic cmlnaHQ="},
		{"secret as a prefix", "Bearer righ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+JoinPath, strings.NewReader(`{"name":"x","peerURL":"https://1.2.3.4:2380","add":true}`))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status: got %d, want 401", resp.StatusCode)
			}
		})
	}
	if etcd.added != 0 {
		t.Errorf("learners added: got %d, want 0", etcd.added)
	}
}

// TestProofResistsGuessing checks that a proof, which anyone may ask for,
// cannot be checked against a guessed secret with one HMAC: the key is a
// slow derivation of the secret.
func TestProofResistsGuessing(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n")
	const secret, nonce = "the-right-secret", "0123456789abcdef"
	cheap := hmac.New(sha256.New, []byte(secret))
	cheap.Write([]byte("portal-join-ca\x00" + nonce + "\x00"))
	cheap.Write(ca)
	got := proof(secret, nonce, ca)
	if got == hex.EncodeToString(cheap.Sum(nil)) {
		t.Fatal("the proof is the HMAC keyed with the bare secret: one hash checks a guess")
	}
	if got != proof(secret, nonce, ca) {
		t.Fatal("two proofs of one secret, nonce and CA differ")
	}
	if proofKeyIterations < 600_000 {
		t.Errorf("proof key work factor %d, want at least OWASP's 600000 for PBKDF2-HMAC-SHA256", proofKeyIterations)
	}
}

// TestJoinBlockedByAnUnstartedLearner: a joiner that crashed after its
// learner was added leaves it behind, and etcd admits one learner; a
// later joiner is told which member blocks it and how to remove it.
func TestJoinBlockedByAnUnstartedLearner(t *testing.T) {
	etcd := &fakeEtcd{members: []Member{{ID: 1, Name: "s1", PeerURLs: []string{"https://10.0.0.1:2380"}},
		{ID: 0x65, PeerURLs: []string{"https://10.0.0.2:2380"}, Learner: true}}}
	srv, caPEM := joinServer(t, "right", etcd)
	pinned, _ := Token{Secret: "right"}.Pinned(caPEM)
	c := &Client{Server: srv.URL, Token: pinned}
	_, _, err := c.Join(context.Background(), Request{Name: "s3", PeerURL: "https://10.0.0.3:2380", Add: true})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("Join: got error %v, want %v", err, ErrConflict)
	}
	for _, want := range []string{"etcd member 65 (peer URL https://10.0.0.2:2380)", "has not started", "member remove 65", "apiserver-client.crt"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Join error %q does not say %q", err, want)
		}
	}
	if etcd.added != 0 {
		t.Errorf("learners added: got %d, want 0", etcd.added)
	}
	if _, _, err := c.Join(context.Background(), Request{Name: "s2", PeerURL: "https://10.0.0.2:2380", Add: true}); err != nil {
		t.Errorf("the server the learner was added for, retrying: %v, want it to start the learner", err)
	}
}
