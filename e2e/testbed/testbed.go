// Package testbed builds small networks out of Linux network namespaces for
// the data-plane tests: a node namespace (where a test runs `portal server`
// or `portal proxy`), pod namespaces behind a bridge in the node, and client
// namespaces outside the node joined to it by a veth. It owns only what it
// creates, and removes every namespace, link and process when the test ends,
// also when it fails. Traffic never leaves these namespaces: nothing is added
// to the host's own network namespace.
//
// The test process itself can act inside a namespace: NS.Dial and NS.Listen
// create their sockets there (see inNS), so backends can be plain goroutines
// and client-go can reach an API server that listens inside the node.
package testbed

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Bed is one test's set of namespaces. Use New; its zero value is not usable.
type Bed struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	nss    []*NS
}

var beds atomic.Int32

// New returns an empty bed, or skips the test when it cannot build one
// (not root, or no `ip` command). Everything the bed makes is removed in
// t.Cleanup.
func New(t testing.TB) *Bed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network-namespace test: needs root (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("network-namespace test: needs `ip` from iproute2 (./hack/deps.sh installs it)")
	}
	// Names are short (IFNAMSIZ is 16) and unique per process and bed, so
	// parallel tests and leftovers of a killed run never collide.
	b := &Bed{t: t, prefix: fmt.Sprintf("tb%d-%d", os.Getpid()%100000, beds.Add(1))}
	t.Cleanup(b.teardown)
	return b
}

// NS is one network namespace of a bed.
type NS struct {
	bed  *Bed
	Name string // the name under /run/netns
	fd   int
	nics int
}

// Namespace creates a network namespace with loopback up.
func (b *Bed) Namespace(name string) *NS {
	b.t.Helper()
	full := b.prefix + "-" + name
	b.run("ip", "netns", "add", full)
	fd, err := unix.Open("/run/netns/"+full, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.run("ip", "netns", "del", full)
		b.t.Fatalf("open namespace %s: %v", full, err)
	}
	ns := &NS{bed: b, Name: full, fd: fd}
	b.mu.Lock()
	b.nss = append(b.nss, ns)
	b.mu.Unlock()
	ns.MustRun("ip", "link", "set", "lo", "up")
	return ns
}

// Bridge creates a bridge in ns with the first address of cidr (e.g.
// "10.244.0.1/24") and turns on forwarding, as a node does for its pods.
func (ns *NS) Bridge(name, addr string) {
	ns.bed.t.Helper()
	ns.MustRun("ip", "link", "add", name, "type", "bridge")
	ns.MustRun("ip", "addr", "add", addr, "dev", name)
	ns.MustRun("ip", "link", "set", name, "up")
	ns.Forwarding()
}

// Forwarding turns on IPv4 and IPv6 forwarding inside ns.
func (ns *NS) Forwarding() {
	ns.bed.t.Helper()
	ns.MustRun("sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
}

// Pod creates a namespace joined to the bridge br of node by a veth, with
// address addr (e.g. "10.244.0.5/24") and a default route via gw.
func (b *Bed) Pod(name string, node *NS, br, addr, gw string) *NS {
	b.t.Helper()
	pod := b.Namespace(name)
	host := node.vethTo(pod)
	node.MustRun("ip", "link", "set", host, "master", br)
	node.MustRun("ip", "link", "set", host, "up")
	pod.MustRun("ip", "addr", "add", addr, "dev", "eth0")
	pod.MustRun("ip", "link", "set", "eth0", "up")
	pod.MustRun("ip", "route", "add", "default", "via", gw)
	return pod
}

// Link joins a and b with a veth pair, a side addressed aAddr and b side
// bAddr (both with prefix length, e.g. "10.100.0.1/24").
func (b *Bed) Link(a *NS, aAddr string, other *NS, bAddr string) {
	b.t.Helper()
	peer := fmt.Sprintf("eth%d", other.nics)
	local := a.vethTo(other)
	a.MustRun("ip", "addr", "add", aAddr, "dev", local)
	a.MustRun("ip", "link", "set", local, "up")
	other.MustRun("ip", "addr", "add", bAddr, "dev", peer)
	other.MustRun("ip", "link", "set", peer, "up")
}

// vethTo creates a veth pair with one end in ns (returned, named after the
// peer namespace) and the other moved into peer as its next ethN.
func (ns *NS) vethTo(peer *NS) string {
	ns.bed.t.Helper()
	peerName := fmt.Sprintf("eth%d", peer.nics)
	peer.nics++
	ns.nics++
	local := fmt.Sprintf("v%d-%s", ns.nics, lastPart(peer.Name))
	if len(local) > 15 {
		local = local[:15]
	}
	ns.MustRun("ip", "link", "add", local, "type", "veth", "peer", "name", peerName, "netns", peer.Name)
	return local
}

func lastPart(name string) string { return name[strings.LastIndex(name, "-")+1:] }

// Command returns a command that runs inside ns.
func (ns *NS) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Run runs a command inside ns and returns its combined output.
func (ns *NS) Run(name string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := ns.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), ns.Name, err, out.String())
	}
	return out.String(), err
}

// MustRun is Run that fails the test on error.
func (ns *NS) MustRun(name string, args ...string) string {
	ns.bed.t.Helper()
	out, err := ns.Run(name, args...)
	if err != nil {
		ns.bed.t.Fatal(err)
	}
	return out
}

// inNS runs f on an OS thread that has joined ns. Sockets f creates belong
// to ns for their whole life, whichever thread uses them later. The thread
// goes back to the original namespace afterwards; if it cannot, it is left
// locked so the runtime discards it instead of reusing it.
func (ns *NS) inNS(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(ns.fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter %s: %w", ns.Name, err)
			return
		}
		ferr := f()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("leave %s: %w", ns.Name, err) // thread stays locked and dies with this goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// DialContext connects from inside ns.
func (ns *NS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return ns.DialFrom(ctx, network, netip.Addr{}, addr)
}

// DialFrom connects from inside ns with source address src (unspecified:
// the kernel picks).
func (ns *NS) DialFrom(ctx context.Context, network string, src netip.Addr, addr string) (net.Conn, error) {
	var c net.Conn
	err := ns.inNS(func() error {
		d := net.Dialer{}
		if src.IsValid() {
			switch {
			case strings.HasPrefix(network, "udp"):
				d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
			default:
				d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
			}
		}
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen opens a TCP listener inside ns.
func (ns *NS) Listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := ns.inNS(func() (err error) { l, err = net.Listen("tcp", addr); return err })
	return l, err
}

// ListenPacket opens a UDP socket inside ns.
func (ns *NS) ListenPacket(addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := ns.inNS(func() (err error) { c, err = net.ListenPacket("udp", addr); return err })
	return c, err
}

// Start runs a long-lived command inside ns, its output appended to log.
// It is killed when the test ends.
func (ns *NS) Start(log *os.File, name string, args ...string) *exec.Cmd {
	ns.bed.t.Helper()
	cmd := ns.Command(name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		ns.bed.t.Fatal(err)
	}
	ns.bed.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

func (b *Bed) run(name string, args ...string) {
	b.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		b.t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// teardown deletes the namespaces in reverse order. Deleting a namespace
// removes its links and the veth peers in other namespaces, and its own
// nftables tables and conntrack entries with it.
func (b *Bed) teardown() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.nss) - 1; i >= 0; i-- {
		ns := b.nss[i]
		killIn(ns.Name)
		unix.Close(ns.fd)
		if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
			b.t.Errorf("remove namespace %s: %v: %s", ns.Name, err, out)
		}
	}
	b.nss = nil
}

// killIn kills every process still running inside the named namespace, so
// that nothing a test started outlives it even if it forgot to stop it.
func killIn(name string) {
	out, _ := exec.Command("ip", "netns", "pids", name).Output()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
