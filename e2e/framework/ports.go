package framework

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
)

// The ports FreePort hands out lie in [portsFrom, portsTo), below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768 and up by
// default) and below the NodePort range. A port picked from the ephemeral
// range is free only until the process it is meant for binds it: in
// between, any listener on port 0 or any outgoing connection on the host
// may take it, the server's own embedded etcd and metrics listeners among
// them. An Ingress controller whose port was taken that way is left out
// while /readyz says ok, and its test then waits in vain. The kernel never
// hands out ports below its range on its own.
const (
	portsFrom = 20000
	portsTo   = 30000
)

var (
	portsMu sync.Mutex
	// portsGiven are the ports this process handed out, never twice: a
	// test's HTTP and HTTPS ports must differ even when the first is not
	// bound yet when the second is picked.
	portsGiven = map[int]bool{}
)

// FreePort is a port free for TCP and UDP on every address of the host,
// outside the kernel's ephemeral range, that this process has not handed
// out before.
func FreePort(t testing.TB) int {
	t.Helper()
	from, to := portRange()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := from + rand.IntN(to-from)
		if portsGiven[port] || !portFree(port) {
			continue
		}
		portsGiven[port] = true
		return port
	}
	t.Fatalf("no free port in [%d, %d) after 1000 tries", from, to)
	return 0
}

// portRange is [portsFrom, portsTo), cut off where the ephemeral range
// starts if it starts lower and leaves enough ports below it.
func portRange() (from, to int) {
	var lo, hi int
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return portsFrom, portsTo
	}
	if _, err := fmt.Sscan(string(data), &lo, &hi); err != nil || lo-portsFrom < 1000 {
		return portsFrom, portsTo
	}
	return portsFrom, min(lo, portsTo)
}

// portFree says whether port can be bound on every address, for TCP as the
// Ingress controller and the API server bind it and for UDP as the DNS does.
func portFree(port int) bool {
	addr := fmt.Sprintf(":%d", port)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	p, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	p.Close()
	return true
}
