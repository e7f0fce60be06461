package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"go.uber.org/zap/zapcore"
	"portal.dev/portal/apiserver/embeddedetcd"
	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// haBed is the bed of the high-availability tests: server nodes, each a
// network namespace with its own address on one LAN (a bridge in a
// namespace of its own, like a switch), each running `portal server` on
// port 6443 of its address, the first with --cluster-init and the others
// with --join. AddWorker adds a worker node serving a Service and a
// client that sends it requests (the fault tests' data-plane load); tests
// may add more namespaces to the LAN with Attach. Isolate and Heal cut a
// node off the LAN and back with nftables rules inside its namespace.
type haBed struct {
	t   *testing.T
	bed *testbed.Bed
	lan *testbed.NS
	// Nodes are the server nodes, in the order they were added.
	Nodes []*haNode
	// ServerArgs are passed to every server started after they are set;
	// by default the servers run the API and the controllers only.
	ServerArgs []string
	// Token is the cluster's join token, read from the first server's
	// data directory once it runs.
	Token string
	next  int
}

// haNode is one server node of a haBed.
type haNode struct {
	// Name is the node name, also its etcd member name.
	Name string
	// IP is the node's address on the LAN.
	IP string
	NS *testbed.NS
	// Server is the node's `portal server` (nil until started); its
	// Args are the node's flags, so Start restarts it as it was.
	Server *framework.Server
	// DataDir is the server's data directory, kept across restarts.
	DataDir string
}

// haLANPrefix is the LAN of the bed: nodes get .1, .2, ..., the switch .254.
// It lies outside the Service range (10.96.0.0/12), so no cluster IP the
// servers hand out can shadow a node for a proxy on the LAN.
const haLANPrefix = "10.89.0."

// newHABed returns a bed with n server nodes s1..sN, none started yet.
func newHABed(t *testing.T, n int) *haBed {
	t.Helper()
	b := &haBed{t: t, bed: testbed.New(t), ServerArgs: []string{"--disable", "dns,proxy,agent,ingress", "--node-monitor-grace-period", "1h"}}
	b.lan = b.bed.Namespace("lan")
	b.lan.Bridge("br0", haLANPrefix+"254/24")
	for range n {
		b.AddNode()
	}
	return b
}

// Attach adds a namespace to the LAN with the next free address and
// returns it with that address.
func (b *haBed) Attach(name string) (*testbed.NS, string) {
	b.t.Helper()
	b.next++
	ip := fmt.Sprintf("%s%d", haLANPrefix, b.next)
	ns := b.bed.Pod(name, b.lan, "br0", ip+"/24", haLANPrefix+"254")
	return ns, ip
}

// AddNode adds a server node, not started.
func (b *haBed) AddNode() *haNode {
	b.t.Helper()
	name := fmt.Sprintf("s%d", len(b.Nodes)+1)
	ns, ip := b.Attach(name)
	n := &haNode{Name: name, IP: ip, NS: ns, DataDir: b.t.TempDir()}
	b.Nodes = append(b.Nodes, n)
	return n
}

// URL is the node's API URL on the LAN.
func (n *haNode) URL() string { return "https://" + n.IP + ":6443" }

// server builds the node's server with the bed's arguments and extra.
func (b *haBed) server(n *haNode, extra ...string) *framework.Server {
	args := append([]string{"--bind-address", "0.0.0.0", "--advertise-address", n.IP, "--hostname-override", n.Name}, b.ServerArgs...)
	s := &framework.Server{Command: "server", DataDir: n.DataDir, Port: 6443, Args: append(args, extra...),
		Wrap: []string{"ip", "netns", "exec", n.NS.Name}, Dial: n.NS.DialContext}
	framework.Attach(b.t, s)
	return s
}

// Init starts the first node with --cluster-init and reads the token.
func (b *haBed) Init(extra ...string) {
	b.t.Helper()
	n := b.Nodes[0]
	n.Server = b.server(n, append([]string{"--cluster-init"}, extra...)...)
	n.Server.Start()
	data, err := os.ReadFile(filepath.Join(n.DataDir, "token"))
	if err != nil {
		b.t.Fatalf("token of the first server: %v", err)
	}
	b.Token = strings.TrimSpace(string(data))
}

// Join starts node n with --join to the first node and the bed's token.
func (b *haBed) Join(n *haNode, extra ...string) {
	b.t.Helper()
	n.Server = b.server(n, append([]string{"--join", b.Nodes[0].URL(), "--token", b.Token}, extra...)...)
	n.Server.Start()
}

// Start starts a cluster of every node: the first inits, the others join.
func (b *haBed) Start() {
	b.t.Helper()
	b.Init()
	for _, n := range b.Nodes[1:] {
		b.Join(n)
	}
}

// Isolate drops every packet in and out of n but loopback's: a network
// partition of n from the others. Connections of n's own processes on
// loopback, and the test's through n.NS.DialContext, keep working.
func (b *haBed) Isolate(n *haNode) {
	b.t.Helper()
	n.NS.MustRun("nft", "add table inet habed; "+
		"add chain inet habed in { type filter hook input priority -10; }; add rule inet habed in iifname != lo drop; "+
		"add chain inet habed out { type filter hook output priority -10; }; add rule inet habed out oifname != lo drop")
}

// Heal undoes Isolate.
func (b *haBed) Heal(n *haNode) {
	b.t.Helper()
	n.NS.MustRun("nft", "delete", "table", "inet", "habed")
}

// Etcd is a client of n's embedded etcd, through its loopback client URL
// inside n's namespace, with the API server's etcd credentials.
func (b *haBed) Etcd(n *haNode) *clientv3.Client {
	b.t.Helper()
	var port int
	data, err := os.ReadFile(filepath.Join(n.DataDir, "etcd-ports"))
	if err == nil {
		_, err = fmt.Sscan(string(data), &port)
	}
	if err != nil {
		b.t.Fatalf("etcd port of %s: %v", n.Name, err)
	}
	pkiDir := filepath.Join(n.DataDir, "pki", "etcd")
	info := transport.TLSInfo{CertFile: filepath.Join(pkiDir, "apiserver-client.crt"), KeyFile: filepath.Join(pkiDir, "apiserver-client.key"),
		TrustedCAFile: filepath.Join(pkiDir, "ca.crt")}
	tlsConfig, err := info.ClientConfig()
	if err != nil {
		b.t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{fmt.Sprintf("https://127.0.0.1:%d", port)}, TLS: tlsConfig, DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return n.NS.DialContext(ctx, "tcp", addr)
		})},
		Logger: embeddedetcd.QuietLogger(zapcore.FatalLevel),
	})
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { c.Close() })
	return c
}

// Members is the etcd member list as n's etcd reports it: the names of
// the voting members, sorted, and a learner's as "NAME (learner)".
func (b *haBed) Members(n *haNode) ([]string, error) {
	c := b.Etcd(n)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range resp.Members {
		name := m.Name
		if m.IsLearner {
			name += " (learner)"
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// WaitMembers waits until n reports exactly the members want (sorted).
func (b *haBed) WaitMembers(n *haNode, want ...string) {
	b.t.Helper()
	slices.Sort(want)
	eventuallyWithin(b.t, 30*time.Second, "etcd member list of "+n.Name, func() (bool, string) {
		got, err := b.Members(n)
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(got, want), fmt.Sprintf("got %v, want %v", got, want)
	})
}

// Leader is the node whose etcd member leads, as n's etcd reports.
func (b *haBed) Leader(n *haNode) *haNode {
	b.t.Helper()
	c := b.Etcd(n)
	defer c.Close()
	var leader *haNode
	eventuallyWithin(b.t, 30*time.Second, "an etcd leader", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		status, err := c.Status(ctx, c.Endpoints()[0])
		if err != nil {
			return false, err.Error()
		}
		list, err := c.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range list.Members {
			if m.ID != status.Leader {
				continue
			}
			for _, node := range b.Nodes {
				if node.Name == m.Name {
					leader = node
				}
			}
		}
		return leader != nil, fmt.Sprintf("leader %x", status.Leader)
	})
	return leader
}

// Refused runs `portal server` on node n with the bed's arguments and
// extra, expects it to exit with an error within a minute, and returns its
// output.
func (b *haBed) Refused(n *haNode, dataDir string, extra ...string) string {
	b.t.Helper()
	s := b.server(n, extra...)
	args := append([]string{"server", "--data-dir", dataDir, "--secure-port", "6443"}, s.Args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.NS.Name, framework.Binary(b.t)}, args...)...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		b.t.Fatalf("portal server %v: still running after a minute, want a refusal; output:\n%s", extra, tail(string(out), 20))
	}
	if err == nil {
		b.t.Fatalf("portal server %v: exited 0, want a refusal; output:\n%s", extra, tail(string(out), 20))
	}
	return string(out)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
