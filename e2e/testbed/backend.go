package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Backend is a server inside a pod namespace that answers every TCP
// connection and every UDP datagram on its port with its own name, so a
// client can tell which endpoint a service sent it to.
type Backend struct {
	Name string
	IP   netip.Addr
	Port int

	tcp net.Listener
	udp net.PacketConn
	wg  sync.WaitGroup

	mu      sync.Mutex
	udpFrom map[string]int // client address -> datagrams answered
}

// Serve starts a Backend named name on port (TCP and UDP) inside pod, whose
// address is ip. It stops when the test ends.
func (pod *NS) Serve(name string, ip netip.Addr, port int) *Backend {
	pod.bed.t.Helper()
	addr := net.JoinHostPort(ip.String(), fmt.Sprint(port))
	tcp, err := pod.Listen(addr)
	if err != nil {
		pod.bed.t.Fatal(err)
	}
	udp, err := pod.ListenPacket(addr)
	if err != nil {
		tcp.Close()
		pod.bed.t.Fatal(err)
	}
	b := &Backend{Name: name, IP: ip, Port: port, tcp: tcp, udp: udp, udpFrom: map[string]int{}}
	b.wg.Add(2)
	go b.serveTCP()
	go b.serveUDP()
	pod.bed.t.Cleanup(b.Close)
	return b
}

func (b *Backend) serveTCP() {
	defer b.wg.Done()
	for {
		c, err := b.tcp.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			// The name first, then echo whatever the client sends, so a
			// test can hold a connection open and keep using it.
			io.WriteString(c, b.Name+"\n")
			io.Copy(c, c)
		}()
	}
}

func (b *Backend) serveUDP() {
	defer b.wg.Done()
	buf := make([]byte, 2048)
	for {
		_, from, err := b.udp.ReadFrom(buf)
		if err != nil {
			return
		}
		b.mu.Lock()
		b.udpFrom[from.String()]++
		b.mu.Unlock()
		b.udp.WriteTo([]byte(b.Name), from)
	}
}

// UDPClients returns how many datagrams the backend answered per client
// address (ip:port as the backend saw it).
func (b *Backend) UDPClients() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.udpFrom))
	for k, v := range b.udpFrom {
		out[k] = v
	}
	return out
}

// Close stops the backend: new connections are refused from then on.
func (b *Backend) Close() {
	b.tcp.Close()
	b.udp.Close()
	b.wg.Wait()
}

// AskTCP connects from ns (from src, if valid) to addr and returns the name
// of the backend that answered.
func (ns *NS) AskTCP(ctx context.Context, src netip.Addr, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := ns.DialFrom(ctx, "tcp", src, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line := make([]byte, 64)
	n, err := c.Read(line)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(line[:n])), nil
}

// UDPClient is a UDP socket inside a namespace, bound to one local port so
// successive datagrams form one flow (the same conntrack entry).
type UDPClient struct {
	conn *net.UDPConn
	to   *net.UDPAddr
}

// UDPClient opens a UDP socket in ns "connected" to addr; localPort 0 lets
// the kernel pick.
func (ns *NS) UDPClient(addr string, localPort int) (*UDPClient, error) {
	to, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	var conn *net.UDPConn
	err = ns.inNS(func() (err error) {
		conn, err = net.ListenUDP("udp", &net.UDPAddr{Port: localPort})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &UDPClient{conn: conn, to: to}, nil
}

// Ask sends one datagram and returns the answering backend's name, or an
// error when nothing answers within timeout (or an ICMP error arrives).
func (u *UDPClient) Ask(timeout time.Duration) (string, error) {
	if _, err := u.conn.WriteTo([]byte("who"), u.to); err != nil {
		return "", err
	}
	u.conn.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 256)
	n, _, err := u.conn.ReadFrom(buf)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return "", fmt.Errorf("no UDP answer from %s within %v", u.to, timeout)
		}
		return "", err
	}
	return string(buf[:n]), nil
}

// LocalPort is the client's source port.
func (u *UDPClient) LocalPort() int { return u.conn.LocalAddr().(*net.UDPAddr).Port }

// Close closes the socket.
func (u *UDPClient) Close() { u.conn.Close() }
