// Package dialcheck answers "does anything listen on this pod's port?"
// from the node the pod runs on. The node agent serves it to the API
// server (nodes/NAME/proxy/dial), so portal explain can tell a port
// nobody listens on from one a firewall drops, without root on the node.
// It only dials; it sends nothing and reads nothing.
package dialcheck

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// The outcomes of a dial.
const (
	// Open: the connection was accepted.
	Open = "open"
	// Refused: the host answered with a reset; nothing listens.
	Refused = "refused"
	// Timeout: no answer within the timeout (dropped, or host down).
	Timeout = "timeout"
	// Unreachable: no route to the address.
	Unreachable = "unreachable"
	// Unchecked: the protocol cannot be checked by dialing (UDP, SCTP).
	Unchecked = "unchecked"
)

// Result is the answer to one check, the JSON the agent serves.
type Result struct {
	Address  string `json:"address"`
	Protocol string `json:"protocol"`
	Result   string `json:"result"`
	Error    string `json:"error,omitempty"`
	Millis   int64  `json:"millis"`
}

// Dialer opens connections; net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Check dials addr over protocol (TCP is the only one checked) with
// timeout and says what happened.
func Check(ctx context.Context, d Dialer, addr netip.AddrPort, protocol string, timeout time.Duration) Result {
	r := Result{Address: addr.String(), Protocol: protocol}
	if protocol != "" && protocol != "TCP" {
		r.Result = Unchecked
		return r
	}
	r.Protocol = "TCP"
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	c, err := d.DialContext(ctx, "tcp", addr.String())
	r.Millis = time.Since(start).Milliseconds()
	if err == nil {
		c.Close()
		r.Result = Open
		return r
	}
	r.Error = err.Error()
	r.Result = classify(err)
	return r
}

// classify names the way a dial failed.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return Unreachable
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return Timeout
	}
	return Unreachable
}
