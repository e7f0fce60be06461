//go:build !(linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || s390x || riscv64 || loong64))

package dns

import (
	"context"
	"net"
	"sync"
)

func listenUDP(addr string, port int, _ bool) (*net.UDPConn, error) {
	return net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(addr), Port: port})
}

// serveUDP reads, answers and writes one packet at a time.
func (s *Server) serveUDP(ctx context.Context, c *net.UDPConn, wg *sync.WaitGroup) {
	w := newWorker(s)
	in := make([]byte, 65535)
	out := make([]byte, 65535)
	for {
		n, from, err := c.ReadFromUDPAddrPort(in)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		fam := famIPv4
		if from.Addr().Is6() && !from.Addr().Is4In6() {
			fam = famIPv6
		}
		resp, fwd := w.handle(in[:n], out, fam)
		if fwd != nil {
			s.forwardAsync(ctx, wg, c, fwd, from, fam)
			continue
		}
		if resp != nil {
			c.WriteToUDPAddrPort(resp, from)
		}
	}
}
