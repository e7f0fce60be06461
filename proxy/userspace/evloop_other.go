//go:build !linux

package userspace

import "syscall"

// listenControl prepares listening sockets; Go's net package sets
// TCP_NODELAY on each accepted connection itself.
var listenControl func(network, address string, c syscall.RawConn) error

// evLoop is the Linux TCP event loop; elsewhere TCP goes through Go's net
// package (frontend.serveTCP).
type evLoop struct{}

func (p *Proxier) tcpLoops() []*evLoop { return nil }

func (l *evLoop) addListener(*frontend, bool) {}

func (l *evLoop) removeListener(*frontend) {}
