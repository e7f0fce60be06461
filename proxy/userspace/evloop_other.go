//go:build !linux

package userspace

// evLoop is the Linux TCP event loop; elsewhere TCP goes through Go's net
// package (frontend.serveTCP).
type evLoop struct{}

func (p *Proxier) tcpLoops() []*evLoop { return nil }

func (l *evLoop) addListener(*frontend, bool) {}

func (l *evLoop) removeListener(*frontend) {}
