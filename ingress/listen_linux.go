package ingress

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// deferAccept has the kernel hold a new connection back from accept until
// its client's first bytes are in, as nginx's `deferred` and HAProxy's
// `defer-accept` do: the first read of the connection then finds the
// request (or the TLS hello) instead of an empty socket, a wait in the
// poller and a second read. Every protocol served here has the client
// speak first. A client that connects and sends nothing is accepted all
// the same once the kernel has retransmitted its SYN-ACK for a second (the
// value nginx sets), and from then on has readHeaderTimeout like any
// other; a listener that refuses the option is served without it.
func deferAccept(network, address string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, 1)
	})
}
