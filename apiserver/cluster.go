package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"k8s.io/klog/v2"

	"portal.dev/portal/apiserver/clusterjoin"
	"portal.dev/portal/apiserver/embeddedetcd"
	"portal.dev/portal/pki"
)

// ClusterOptions make the embedded etcd a cluster of servers, as k3s's
// --cluster-init, --server and --token do.
type ClusterOptions struct {
	// Init starts a one-member cluster that other servers can join.
	Init bool
	// Join is the URL of a server of the cluster to join.
	Join string
	// Token is the join token; empty on the first server means the one
	// in the data directory, or a new one.
	Token string
	// TokenFile is a file that holds the join token, so that the secret
	// need not be on the command line, where every local user can read
	// it; ValidateCluster reads it into Token.
	TokenFile string
	// Leave removes this server's member from the cluster when it shuts
	// down cleanly.
	Leave bool
	// Name is the member name, the node name; unique in the cluster.
	Name string
	// PeerPort is the port etcd's peers dial on the advertise address.
	PeerPort int
}

// DefaultEtcdPeerPort is etcd's own peer port.
const DefaultEtcdPeerPort = 2380

// member says whether this server runs a member of a cluster of servers:
// asked to by a flag, or started as one before.
func (c ClusterOptions) member(dataDir string) bool {
	if c.Init || c.Join != "" {
		return true
	}
	_, ok := embeddedetcd.ClusterID(dataDir)
	return ok
}

// ValidateCluster reads the token file into the token and refuses flags
// that contradict each other.
func (o *Options) ValidateCluster() error {
	if err := o.Cluster.readTokenFile(); err != nil {
		return err
	}
	c := o.Cluster
	switch {
	case (c.Init || c.Join != "" || c.Leave) && len(o.EtcdServers) > 0:
		return errors.New("--cluster-init, --join and --leave are for the embedded etcd; with --etcd-servers the servers share that etcd already: leave them out")
	case c.Init && c.Join != "":
		return errors.New("--cluster-init starts a new cluster and --join joins one: pass only one")
	case c.Join != "" && c.Token == "":
		return fmt.Errorf("--join needs --token or --token-file: the token of the cluster, in the file %q of the data directory of a server in it", "token")
	case c.Join != "" && !strings.HasPrefix(c.Join, "https://"):
		return fmt.Errorf("--join %s: want the https URL of a server, such as https://10.0.0.1:6443", c.Join)
	}
	return nil
}

// readTokenFile sets Token from TokenFile, once.
func (c *ClusterOptions) readTokenFile() error {
	if c.TokenFile == "" {
		return nil
	}
	if c.Token != "" {
		return errors.New("--token and --token-file both give the join token: pass only one")
	}
	data, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return fmt.Errorf("--token-file %s: the file is empty", c.TokenFile)
	}
	c.Token, c.TokenFile = tok, ""
	return nil
}

// clusterMember is the etcd membership of this server, from its options.
func (o Options) clusterMember() *embeddedetcd.Cluster {
	name := o.Cluster.Name
	if name == "" {
		name, _ = os.Hostname()
	}
	port := o.Cluster.PeerPort
	if port == 0 {
		port = DefaultEtcdPeerPort
	}
	return &embeddedetcd.Cluster{Name: name, AdvertiseIP: o.AdvertiseAddress, PeerPort: port}
}

// prepareJoin asks the server at --join for what the servers share, checks
// that this data directory may join, writes the shared files into it and
// has the member added; m.Join then says whom etcd joins. A data directory
// that is a member of a cluster already just restarts and asks nothing, so
// a server restarts while its --join target is down. Every refusal comes
// before the cluster changes.
func prepareJoin(ctx context.Context, o *Options, m *embeddedetcd.Cluster) error {
	tok, err := clusterjoin.ParseToken(o.Cluster.Token)
	if err != nil {
		return fmt.Errorf("--token: %w", err)
	}
	if embeddedetcd.HasMember(o.DataDir) {
		return restartMember(o, tok)
	}
	client := &clusterjoin.Client{Server: o.Cluster.Join, Token: tok}
	req := clusterjoin.Request{Name: m.Name, PeerURL: m.PeerURL()}
	_, ca, err := client.Join(ctx, req)
	if err != nil {
		return fmt.Errorf("--join: %w", err)
	}
	if own, err := os.ReadFile(filepath.Join(o.DataDir, "pki", "ca.crt")); err == nil && !bytes.Equal(own, ca) {
		return fmt.Errorf("--join: the data directory %s has a cluster CA of its own, not %s's: it belongs to another cluster; "+
			"start with another --data-dir, or move this one away", o.DataDir, o.Cluster.Join)
	}
	req.Add = true
	b, _, err := client.Join(ctx, req)
	if err != nil {
		return fmt.Errorf("--join: %w", err)
	}
	if err := writeBundle(o, b); err != nil {
		return fmt.Errorf("--join: %w", err)
	}
	m.Join = &embeddedetcd.Join{InitialCluster: initialCluster(b, m.Name)}
	klog.InfoS("Joining the etcd cluster as a learner", "server", o.Cluster.Join, "member", m.Name, "cluster", fmt.Sprintf("%x", b.ClusterID))
	return nil
}

// restartMember checks, without asking any server, that the data
// directory, which holds an etcd member, belongs to a cluster of servers
// and, when the token pins a CA, to that CA's cluster.
func restartMember(o *Options, tok clusterjoin.Token) error {
	if _, ok := embeddedetcd.ClusterID(o.DataDir); !ok {
		return fmt.Errorf("--join: the data directory %s holds the etcd data of a single server, not of a member of a cluster: "+
			"to join %s, start with another --data-dir or move this one away; to run it, start without --join", o.DataDir, o.Cluster.Join)
	}
	if tok.CAHash != "" {
		own, err := os.ReadFile(filepath.Join(o.DataDir, "pki", "ca.crt"))
		if err != nil {
			return fmt.Errorf("--join: %w", err)
		}
		if hash, err := clusterjoin.CAHash(own); err != nil || hash != tok.CAHash {
			return fmt.Errorf("--join: the data directory %s holds the etcd data of another cluster than the token's (its CA is not the one the token pins): "+
				"to join, start with another --data-dir or move this one away; to run the cluster it belongs to, start without --join", o.DataDir)
		}
	}
	klog.InfoS("This data directory is a member of a cluster already; restarting it, --join not needed", "dataDir", o.DataDir)
	return nil
}

// writeBundle stores the shared files in the data directory.
func writeBundle(o *Options, b *clusterjoin.Bundle) error {
	for _, f := range clusterjoin.SharedFiles {
		path := filepath.Join(o.DataDir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := pki.WriteFileAtomic(path, b.Files[f], fileMode(f)); err != nil {
			return err
		}
	}
	if o.ServiceAccountSigningKeyFile == "" {
		if err := pki.WriteFileAtomic(ServiceAccountKeyPath(o.DataDir), b.Files[clusterjoin.ServiceAccountKeyFile], 0o600); err != nil {
			return err
		}
	}
	if len(b.EncryptionConfig) > 0 && o.EncryptionProviderConfig == "" {
		if err := pki.WriteFileAtomic(encryptionConfigPath(o.DataDir), b.EncryptionConfig, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func fileMode(name string) os.FileMode {
	if strings.HasSuffix(name, ".key") {
		return 0o600
	}
	return 0o644
}

// encryptionConfigPath is where a joined server keeps the cluster's
// EncryptionConfiguration, used when --encryption-provider-config is not
// given.
func encryptionConfigPath(dataDir string) string {
	return filepath.Join(dataDir, "encryption-config.yaml")
}

// initialCluster is etcd's --initial-cluster for the joiner: every member,
// the joiner under its own name. Members never started have no name yet;
// etcd matches members by peer URL, so any unique name serves.
func initialCluster(b *clusterjoin.Bundle, self string) string {
	var parts []string
	for _, m := range b.Members {
		name := m.Name
		switch {
		case m.ID == b.MemberID:
			name = self
		case name == "":
			name = fmt.Sprintf("unstarted-%x", m.ID)
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	return strings.Join(parts, ",")
}

// etcdMembership is the embedded etcd's membership as the join endpoint
// sees it.
type etcdMembership struct{ s *embeddedetcd.Server }

func (m etcdMembership) Members(ctx context.Context) (uint64, []clusterjoin.Member, error) {
	cli := m.s.InProcessClient()
	defer cli.Close()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return 0, nil, err
	}
	var out []clusterjoin.Member
	for _, mb := range resp.Members {
		out = append(out, clusterjoin.Member{ID: mb.ID, Name: mb.Name, PeerURLs: mb.PeerURLs, Learner: mb.IsLearner})
	}
	return resp.Header.ClusterId, out, nil
}

func (m etcdMembership) AddLearner(ctx context.Context, peerURL string) (uint64, []clusterjoin.Member, error) {
	cli := m.s.InProcessClient()
	defer cli.Close()
	// etcd adds a member only once the leader has heard from every voting
	// member for 5 s: a member that joined a moment ago makes the next
	// join wait that long.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := cli.MemberAddAsLearner(ctx, []string{peerURL})
	for err != nil && rpctypes.ErrorDesc(err) == rpctypes.ErrUnhealthy.Error() {
		select {
		case <-ctx.Done():
			return 0, nil, err
		case <-time.After(time.Second):
		}
		resp, err = cli.MemberAddAsLearner(ctx, []string{peerURL})
	}
	if err != nil {
		return 0, nil, err
	}
	var out []clusterjoin.Member
	for _, mb := range resp.Members {
		out = append(out, clusterjoin.Member{ID: mb.ID, Name: mb.Name, PeerURLs: mb.PeerURLs, Learner: mb.IsLearner})
	}
	return resp.Member.ID, out, nil
}

// PrepareJoin does the part of --join that comes before anything is
// written to the data directory by others: it must run before the
// components of `portal server` make credentials from the cluster CA, so
// that they use the CA of the cluster joined. Run calls it when it has not
// run yet.
func PrepareJoin(ctx context.Context, o *Options) error {
	if o.Cluster.Join == "" || o.joinDone || len(o.EtcdServers) > 0 {
		return nil
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return err
	}
	if o.AdvertiseAddress == nil {
		o.AdvertiseAddress = defaultAdvertiseAddress(o.BindAddress)
	}
	m := o.clusterMember()
	if err := prepareJoin(ctx, o, m); err != nil {
		return err
	}
	o.joinDone, o.joinPlan = true, m.Join
	return nil
}

// startClusterMember starts this server's etcd member, joining first when
// asked, and makes the join endpoints that let others join it.
func startClusterMember(ctx context.Context, o *Options) (*embeddedetcd.Server, error) {
	if err := PrepareJoin(ctx, o); err != nil {
		return nil, err
	}
	m := o.clusterMember()
	m.Join = o.joinPlan
	if o.EncryptionProviderConfig == "" {
		if _, err := os.Stat(encryptionConfigPath(o.DataDir)); err == nil {
			o.EncryptionProviderConfig = encryptionConfigPath(o.DataDir)
		}
	}
	etcd, err := embeddedetcd.StartMember(ctx, o.DataDir, m)
	if err != nil {
		return nil, err
	}
	ca, err := pki.LoadOrCreateCA(filepath.Join(o.DataDir, "pki"), "ca")
	if err != nil {
		etcd.Close()
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	tok, err := clusterjoin.EnsureToken(o.DataDir, o.Cluster.Token, ca.CertPEM)
	if err != nil {
		etcd.Close()
		return nil, fmt.Errorf("--token: %w", err)
	}
	klog.InfoS("Servers join this one with the token in the file", "path", clusterjoin.TokenPath(o.DataDir), "member", m.Name, "peerURL", m.PeerURL())
	saKey := o.ServiceAccountSigningKeyFile
	if saKey == "" {
		saKey = ServiceAccountKeyPath(o.DataDir)
	}
	o.joinHandler = clusterjoin.Handler(clusterjoin.HandlerConfig{Token: tok, DataDir: o.DataDir, ServiceAccountKey: saKey,
		EncryptionConfig: o.EncryptionProviderConfig, Etcd: etcdMembership{etcd}})
	return etcd, nil
}

// withJoinEndpoints serves the join endpoints ahead of the API's own
// authentication: they authenticate joiners by the token (see clusterjoin).
func withJoinEndpoints(h, join http.Handler) http.Handler {
	if join == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == clusterjoin.CACertsPath || r.URL.Path == clusterjoin.JoinPath {
			join.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}
