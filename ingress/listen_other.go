//go:build !linux

package ingress

import "syscall"

// deferAccept does nothing where TCP_DEFER_ACCEPT is not known.
func deferAccept(network, address string, c syscall.RawConn) error { return nil }
