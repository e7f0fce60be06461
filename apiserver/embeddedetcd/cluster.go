package embeddedetcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/klog/v2"

	"portal.dev/portal/pki"
)

// Cluster makes the embedded etcd a member of a cluster of servers: it
// keeps its clients on loopback, as the single member does, and talks to
// its peers over mutual TLS on the advertise address, with certificates of
// the etcd CA every server of the cluster shares.
type Cluster struct {
	// Name is the member's name, unique in the cluster: the node name.
	Name string
	// AdvertiseIP is where the peers reach this member.
	AdvertiseIP net.IP
	// PeerPort is the port of the peer URL on AdvertiseIP.
	PeerPort int
	// Join, when set, starts a new member in an existing cluster that has
	// added it as a learner; the member promotes itself once caught up.
	// A member directory that exists already restarts as it is instead.
	Join *Join
}

// Join is the cluster a new member joins.
type Join struct {
	// InitialCluster is the members as "name=peerURL,...", the new one
	// among them, as etcd's --initial-cluster.
	InitialCluster string
}

// PeerURL is the URL the member's peers dial.
func (c *Cluster) PeerURL() string {
	return (&url.URL{Scheme: "https", Host: net.JoinHostPort(c.AdvertiseIP.String(), strconv.Itoa(c.PeerPort))}).String()
}

func (c *Cluster) apply(cfg *embed.Config) {
	cfg.Name = c.Name
	peer, _ := url.Parse(c.PeerURL())
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if c.Join != nil {
		cfg.InitialCluster = c.Join.InitialCluster
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	// Peers must present a certificate of the etcd CA; any of them will
	// do (each has its own address), so no host name check on them.
	cfg.PeerTLSInfo.ClientCertAuth = true
}

// HasMember says whether dataDir holds an etcd member from an earlier start.
func HasMember(dataDir string) bool {
	walFiles, _ := filepath.Glob(filepath.Join(dataDir, "etcd", "member", "wal", "*.wal"))
	return len(walFiles) > 0
}

// clusterIDPath is where a member of a cluster of servers records its
// cluster's ID, so that a join can tell a data directory of another cluster
// before it starts anything.
func clusterIDPath(dataDir string) string { return filepath.Join(dataDir, "etcd-cluster-id") }

// ClusterID returns the etcd cluster ID recorded in dataDir, and false
// when there is none (a data directory never started as a member of a
// cluster of servers).
func ClusterID(dataDir string) (uint64, bool) {
	data, err := os.ReadFile(clusterIDPath(dataDir))
	if err != nil {
		return 0, false
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(data)), 16, 64)
	return id, err == nil
}

// promoteTimeout bounds the wait for a learner to catch up with the leader.
const promoteTimeout = 2 * time.Minute

// settle finishes the start of a cluster member: it records the cluster
// ID, points its peer URL at the advertise address (a member first
// started alone has a loopback one) and, for a learner, waits for it to
// catch up and promotes it.
func (s *Server) settle(ctx context.Context, c *Cluster) error {
	id := uint64(s.etcd.Server.Cluster().ID())
	if err := pki.WriteFileAtomic(clusterIDPath(s.dataDir), []byte(strconv.FormatUint(id, 16)+"\n"), 0o644); err != nil {
		return err
	}
	cli := s.InProcessClient()
	defer cli.Close()
	self := uint64(s.etcd.Server.MemberID())
	if !s.etcd.Server.IsLearner() {
		list, err := cli.MemberList(ctx)
		if err != nil {
			return fmt.Errorf("etcd members: %w", err)
		}
		for _, m := range list.Members {
			if m.ID == self && !slices.Equal(m.PeerURLs, []string{c.PeerURL()}) {
				klog.InfoS("Moving the etcd peer URL to the advertise address", "from", m.PeerURLs, "to", c.PeerURL())
				if _, err := cli.MemberUpdate(ctx, self, []string{c.PeerURL()}); err != nil {
					return fmt.Errorf("etcd peer URL: %w", err)
				}
			}
		}
		return nil
	}
	deadline := time.Now().Add(promoteTimeout)
	for {
		_, err := cli.MemberPromote(ctx, self)
		if err == nil {
			klog.InfoS("Promoted this etcd member from learner to voter", "member", c.Name)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("promote etcd member %s: %w; is the leader reachable on its peer URL?", c.Name, err)
		}
		klog.V(2).InfoS("Learner not ready to be promoted yet", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Leave removes this member from its cluster and stops it, then removes
// its etcd data, so that the data directory can join again: a removed
// member cannot come back with its old identity.
func (s *Server) Leave(ctx context.Context) error {
	if s.dataDir == "" {
		return errors.New("not a member of a cluster of servers")
	}
	cli := s.InProcessClient()
	self := uint64(s.etcd.Server.MemberID())
	_, err := cli.MemberRemove(ctx, self)
	// etcd changes the membership only once the member asking has heard
	// from every peer for 5 s; one that joined a moment ago waits.
	for err != nil && rpctypes.ErrorDesc(err) == rpctypes.ErrUnhealthy.Error() && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		_, err = cli.MemberRemove(ctx, self)
	}
	cli.Close()
	if err != nil {
		return fmt.Errorf("remove etcd member %x: %w", self, err)
	}
	s.etcd.Close()
	s.etcd = nil
	if err := os.RemoveAll(filepath.Join(s.dataDir, "etcd")); err != nil {
		return err
	}
	return os.Remove(clusterIDPath(s.dataDir))
}
