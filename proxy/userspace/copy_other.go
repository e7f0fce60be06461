//go:build !unix

package userspace

import "net"

// copySmall leaves everything to io.Copy (copyTCP's bulk path) where the
// socket's descriptor is not a Unix one.
func copySmall(dst, src *net.TCPConn) (int64, error) { return 0, errBulk }
