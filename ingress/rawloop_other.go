//go:build !unix

package ingress

import "io"

// clientReader reads the connection.
type clientReader struct {
	conn  io.Reader
	inRaw bool
}

func (r *clientReader) Read(p []byte) (int, error) { return r.conn.Read(p) }

func (c *h1Conn) loopRaw() (bool, error) { return false, nil }
func (c *h1Conn) watchRaw() bool         { return false }
func (c *h1Conn) stopWatchRaw()          {}
