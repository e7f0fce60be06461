package apiserver

import (
	"io"
	"net"
	"testing"
)

// pipeListener accepts the server ends of the pipes queued in it.
type pipeListener struct{ conns chan net.Conn }

func (l pipeListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (l pipeListener) Close() error   { return nil }
func (l pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

// A connection accepted before the API server stopped listening, which
// the HTTP/2 server's graceful shutdown missed (its client dialled as the
// server stopped), is closed once requests have drained: before, both its
// ends stayed open after the server returned.
func TestClosingListenerClosesConnsOnceDrained(t *testing.T) {
	conns := make(chan net.Conn, 1)
	server, client := net.Pipe()
	conns <- server
	drained := make(chan struct{})
	l := newClosingListener(pipeListener{conns}, drained)
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	close(drained)
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("client read after the server drained: %v, want %v", err, io.EOF)
	}
}

// When the server returns without draining, stop closes what is open.
func TestClosingListenerStopClosesConns(t *testing.T) {
	conns := make(chan net.Conn, 1)
	server, client := net.Pipe()
	conns <- server
	l := newClosingListener(pipeListener{conns}, make(chan struct{}))
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l.stop()
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("client read after the server stopped: %v, want %v", err, io.EOF)
	}
}
