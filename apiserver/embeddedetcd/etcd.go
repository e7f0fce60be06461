// Package embeddedetcd runs the single-member etcd that `portal server` and
// `portal apiserver` use when no --etcd-servers are given. It listens only on
// loopback, with TLS and client-certificate authentication, and leaves
// compaction to the API server. It owns the etcd directory under the data
// directory and nothing else, and holds an flock on the data directory
// while etcd runs so that a second server there is turned away. Before
// etcd opens its directory it checks the WAL and the database (check.go),
// so that damage on disk ends the start with a message naming the file,
// not a hang or a panic. The check writes nothing, with one exception
// etcd's own start makes too: a corrupt snapshot file (*.snap) is renamed
// *.snap.broken while looking for the newest readable one.
package embeddedetcd

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"

	"portal.dev/portal/pki"
)

// Server is a running embedded etcd.
type Server struct {
	etcd *embed.Etcd
	// lock holds the data directory's flock while etcd runs.
	lock *os.File
	// Endpoint is the https URL clients dial.
	Endpoint string
	// CAFile, CertFile and KeyFile are the client credentials to use.
	CAFile, CertFile, KeyFile string
	// dataDir is set for a member of a cluster of servers.
	dataDir string
	// dbPath is etcd's bbolt database.
	dbPath string
}

// Start starts etcd in dataDir/etcd and returns once it serves clients.
// etcd logs its warnings and errors through ctx's logger (klog's when ctx
// has none).
// Certificates come from dataDir/pki (a CA of their own, separate from the
// API's, so an API client certificate can never open etcd).
// The data directory is locked first and stays locked until Close: a
// second process on it gets an InUseError at once.
func Start(ctx context.Context, dataDir string) (*Server, error) {
	return StartMember(ctx, dataDir, nil)
}

// StartMember is Start for a member of a cluster of servers (see Cluster);
// a nil c is the single loopback member Start runs.
func StartMember(ctx context.Context, dataDir string, c *Cluster) (*Server, error) {
	lock, err := lockDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	s, err := start(ctx, dataDir, c)
	if err != nil {
		lock.Close()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

func start(ctx context.Context, dataDir string, c *Cluster) (*Server, error) {
	pkiDir := filepath.Join(dataDir, "pki", "etcd")
	ca, err := pki.LoadOrCreateCA(pkiDir, "ca")
	if err != nil {
		return nil, fmt.Errorf("etcd CA: %w", err)
	}
	s := &Server{
		CAFile:   filepath.Join(pkiDir, "ca.crt"),
		CertFile: filepath.Join(pkiDir, "server.crt"),
		KeyFile:  filepath.Join(pkiDir, "server.key"),
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	if c != nil {
		ips = append(ips, c.AdvertiseIP)
	}
	if err := ca.EnsureServing(s.CertFile, s.KeyFile, []string{"localhost"}, ips); err != nil {
		return nil, fmt.Errorf("etcd serving certificate: %w", err)
	}
	ports, err := loadPorts(filepath.Join(dataDir, "etcd-ports"))
	if err != nil {
		return nil, err
	}

	cfg := embed.NewConfig()
	cfg.Name = "portal"
	cfg.Dir = filepath.Join(dataDir, "etcd")
	client := url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	// A single member never dials its peer URL, but etcd wants one, records
	// it in its data and listens on it: loopback with the same mutual TLS.
	peer := url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if c != nil {
		c.apply(cfg)
	} else {
		cfg.SnapshotCatchUpEntries = singleMemberCatchUpEntries
	}
	cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = s.CertFile, s.KeyFile
	cfg.ClientTLSInfo.TrustedCAFile = s.CAFile
	cfg.ClientTLSInfo.ClientCertAuth = true
	cfg.PeerTLSInfo = cfg.ClientTLSInfo
	// The API server compacts; etcd must not do it behind its back.
	cfg.AutoCompactionMode, cfg.AutoCompactionRetention = "periodic", "0"
	// The watch cache relies on progress notifications.
	cfg.WatchProgressNotifyInterval = 5 * time.Second
	cfg.QuotaBackendBytes = 8 << 30
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newLogger(klog.FromContext(ctx), zapcore.WarnLevel))

	if err := checkMember(dataDir, filepath.Join(cfg.Dir, "member")); err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s: %w", cfg.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		closeWithin(e, closeTimeout)
		return nil, fmt.Errorf("embedded etcd in %s: %w", cfg.Dir, err)
	case <-time.After(readyTimeout):
		closeWithin(e, closeTimeout)
		return nil, notReadyError(cfg.Dir, dataDir)
	case <-ctx.Done():
		closeWithin(e, closeTimeout)
		return nil, ctx.Err()
	}
	s.etcd = e
	s.Endpoint = client.String()
	s.dbPath = filepath.Join(cfg.Dir, "member", "snap", "db")
	if err := issueClient(ca, pkiDir, s); err != nil {
		e.Close()
		return nil, err
	}
	if c != nil {
		s.dataDir = dataDir
		if err := s.settle(ctx, c); err != nil {
			e.Close()
			return nil, err
		}
	}
	return s, nil
}

// singleMemberCatchUpEntries is how many applied raft entries the single
// member keeps in memory. etcd keeps the last 5,000 (each a whole request)
// for slow followers to catch up from, and after a burst of writes they
// stay until as many new writes push them out; a single member has no
// followers. etcd compacts its in-memory log every 100 applied entries, so
// it then holds at most a few hundred. A member of a cluster of servers
// keeps etcd's default: its followers need them.
const singleMemberCatchUpEntries = 100

const (
	// readyTimeout bounds the wait for etcd to serve once it has loaded
	// its data: a single member elects itself within seconds, and one that
	// cannot commit its own entries never will.
	readyTimeout = 30 * time.Second
	// closeTimeout bounds the wait for stopping an etcd that never became
	// ready, whose Close can block forever on its stuck raft loop.
	closeTimeout = 5 * time.Second
)

// notReadyError says why an etcd may not become ready in time: a loaded
// machine or slow disk (then its log shows progress and a retry, or a
// quieter moment, helps) or damaged data (then its log shows errors and
// only a backup helps). Moving the directory away loses the cluster, so it
// is advice for the second case only.
func notReadyError(etcdDir, dataDir string) error {
	return fmt.Errorf("embedded etcd in %s not ready after %s: it may be slow (a loaded machine or disk) or its data may be damaged; "+
		"etcd's log lines above tell which: if they show no errors, start again, perhaps when the machine is less busy; "+
		"if they show errors reading the WAL or the database, restore the data directory %s from a backup, "+
		"or move it away to start an empty cluster", etcdDir, readyTimeout, dataDir)
}

// closeWithin stops e, waiting at most d. Past d the Close goes on in the
// background: start-up has failed and the process is about to exit.
func closeWithin(e *embed.Etcd, d time.Duration) {
	done := make(chan struct{})
	go func() {
		e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

func issueClient(ca *pki.CA, dir string, s *Server) error {
	s.CertFile = filepath.Join(dir, "apiserver-client.crt")
	s.KeyFile = filepath.Join(dir, "apiserver-client.key")
	if _, err := os.Stat(s.CertFile); err == nil {
		return nil
	}
	cert, key, err := ca.IssueClient("portal-apiserver", nil)
	if err != nil {
		return err
	}
	if err := pki.WriteFileAtomic(s.KeyFile, key, 0o600); err != nil {
		return err
	}
	return pki.WriteFileAtomic(s.CertFile, cert, 0o644)
}

// Close stops etcd; every write it acknowledged is on disk already.
func (s *Server) Close() {
	if s.etcd != nil {
		s.etcd.Close()
	}
	if s.lock != nil {
		s.lock.Close()
	}
}

// InProcessClient returns a client that calls this etcd's request handlers
// directly, without its gRPC port: no TLS, no framing, no sockets. Requests
// take the same path through raft and the disk as over the network. A write
// in flight when this member sees a new leader ends at once with
// ErrLeaderChanged (see leaderAwareKV).
func (s *Server) InProcessClient() *clientv3.Client {
	c := v3client.New(s.etcd.Server)
	c.KV = &leaderAwareKV{KV: c.KV, changed: s.etcd.Server.LeaderChangedNotify}
	return c
}

// Err reports a fatal etcd error while it runs.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// loadPorts returns the loopback client and peer ports this data
// directory's etcd uses: chosen once from the free ports and remembered, so
// that restarts find them again (etcd records its peer URL).
func loadPorts(path string) ([2]int, error) {
	var ports [2]int
	if data, err := os.ReadFile(path); err == nil {
		if _, err := fmt.Sscan(string(data), &ports[0], &ports[1]); err == nil && ports[0] > 0 && ports[1] > 0 {
			return ports, nil
		}
	}
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	if err := pki.WriteFileAtomic(path, []byte(fmt.Sprintln(ports[0], ports[1])), 0o644); err != nil {
		return ports, err
	}
	return ports, nil
}

// QuietLogger is a zap logger for etcd's client library that writes only
// records at level or above, through klog: its info logs are noise in
// Portal's.
func QuietLogger(level zapcore.Level) *zap.Logger {
	return newLogger(klog.Background(), level)
}
