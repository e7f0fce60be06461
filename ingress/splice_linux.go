package ingress

import (
	"net"

	"golang.org/x/sys/unix"
)

// tcpProgress is how many bytes c's peer has acknowledged and c has
// received (TCP_INFO), and whether they could be read.
func tcpProgress(c *net.TCPConn) (acked, received uint64, ok bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var info *unix.TCPInfo
	if cerr := rc.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); cerr != nil || err != nil {
		return 0, 0, false
	}
	return info.Bytes_acked, info.Bytes_received, true
}
