// Package wstunnel serves SPDY tunnelled through a WebSocket, the
// port-forward protocol kubectl speaks since 1.30
// ("SPDY/3.1+portforward.k8s.io"): the WebSocket's binary messages carry
// the bytes of a SPDY connection. An agent that accepts it lets the API
// server proxy kubectl's upgraded connection byte for byte instead of
// decoding the WebSocket and framing the bytes again as SPDY.
//
// It owns the WebSocket upgrade and the net.Conn over the messages; the
// SPDY session on top, and who may open one, are the caller's.
package wstunnel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// Prefix marks a WebSocket subprotocol that tunnels the SPDY protocol
// named after it.
const Prefix = "SPDY/3.1+"

// bufferSize is the WebSocket's read and write buffer. Larger than
// net/http's 4 KiB so that a message is read and written in few calls.
const bufferSize = 64 << 10

// IsRequest says whether r asks for SPDY tunnelled through a WebSocket.
func IsRequest(r *http.Request) bool {
	return wsstream.IsWebSocketRequestWithTunnelingProtocol(r)
}

// Upgrade answers r, a WebSocket request naming one of protocols (SPDY
// protocol names, without Prefix) as a tunnelled subprotocol, and returns
// the connection whose bytes are the SPDY session. When it returns an
// error it has answered the request itself.
func Upgrade(w http.ResponseWriter, r *http.Request, protocols []string) (net.Conn, error) {
	offered := make([]string, len(protocols))
	for i, p := range protocols {
		offered[i] = Prefix + p
	}
	up := websocket.Upgrader{
		ReadBufferSize:  bufferSize,
		WriteBufferSize: bufferSize,
		Subprotocols:    offered,
		// The agent's caller is the API server, proven by its client
		// certificate; there is no browser whose origin to check.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	if !hasCommon(websocket.Subprotocols(r), offered) {
		msg := "unable to upgrade: the client named no tunnelled stream protocol; supported: " + strings.Join(offered, ", ")
		http.Error(w, msg, http.StatusBadRequest)
		return nil, errors.New(msg)
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return nil, fmt.Errorf("upgrade to a WebSocket: %w", err)
	}
	return NewConn(ws), nil
}

func hasCommon(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// Conn is a net.Conn over a WebSocket whose binary messages carry a SPDY
// connection. Reads return the messages' bytes in order, whatever their
// boundaries. Writes are gathered into whole SPDY frames, each sent as one
// message: SPDY's framer writes a frame in several pieces (header fields,
// then the payload), and a message per piece would cost a WebSocket frame
// and a TLS record each.
type Conn struct {
	ws *websocket.Conn

	rmu sync.Mutex
	msg io.Reader // the message being read, nil between messages

	wmu     sync.Mutex
	pending []byte // the start of a frame not yet whole

	closeOnce sync.Once
	closeErr  error
}

// NewConn returns the connection carried by ws's binary messages.
func NewConn(ws *websocket.Conn) *Conn { return &Conn{ws: ws} }

// Read reads the tunnelled bytes. A normal close of the WebSocket is
// io.EOF.
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if c.msg == nil {
			kind, r, err := c.ws.NextReader()
			if err != nil {
				if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
					return 0, io.EOF
				}
				return 0, err
			}
			if kind != websocket.BinaryMessage {
				return 0, fmt.Errorf("tunnel: message of type %d, want binary", kind)
			}
			c.msg = r
		}
		n, err := c.msg.Read(p)
		if err == io.EOF {
			c.msg = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

// spdyHeaderLen is the length of a SPDY/3 frame's header; its last three
// bytes are the length of the rest, for control and data frames alike.
const spdyHeaderLen = 8

// frameLen is the length of the whole SPDY frame b starts with, or -1 if
// b does not hold its header yet.
func frameLen(b []byte) int {
	if len(b) < spdyHeaderLen {
		return -1
	}
	return spdyHeaderLen + (int(b[5])<<16 | int(b[6])<<8 | int(b[7]))
}

// maxKeptBuffer bounds the buffer a Conn keeps between frames for
// gathering the next; a larger one, grown for one large frame, is let go.
const maxKeptBuffer = 1 << 20

// Write sends p once it completes SPDY frames, each frame as one binary
// message; the start of a frame not yet whole waits for the next Write.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.pending) == 0 && frameLen(p) == len(p) {
		return len(p), c.ws.WriteMessage(websocket.BinaryMessage, p)
	}
	c.pending = append(c.pending, p...)
	sent := 0
	for {
		n := frameLen(c.pending[sent:])
		if n < 0 || sent+n > len(c.pending) {
			break
		}
		if err := c.ws.WriteMessage(websocket.BinaryMessage, c.pending[sent:sent+n]); err != nil {
			return 0, err
		}
		sent += n
	}
	c.pending = c.pending[:copy(c.pending, c.pending[sent:])]
	if cap(c.pending) > maxKeptBuffer {
		c.pending = slices.Clone(c.pending)
	}
	return len(p), nil
}

// Close tells the peer the tunnel ends normally, then closes the
// connection.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
		werr := c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
		c.closeErr = c.ws.Close()
		if c.closeErr == nil && werr != nil && !errors.Is(werr, websocket.ErrCloseSent) {
			c.closeErr = werr
		}
	})
	return c.closeErr
}

// LocalAddr is the WebSocket's local address.
func (c *Conn) LocalAddr() net.Addr { return c.ws.LocalAddr() }

// RemoteAddr is the WebSocket's peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.ws.RemoteAddr() }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	return errors.Join(c.ws.SetReadDeadline(t), c.ws.SetWriteDeadline(t))
}

// SetReadDeadline sets the read deadline.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.ws.SetReadDeadline(t) }

// SetWriteDeadline sets the write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.ws.SetWriteDeadline(t) }
