package main

// The "Go floor" proxies: the least a Go program must do to proxy the
// throughput runs' plain-HTTP loads with Go's runtime and net package,
// so that run.sh can show how low any Go proxy can go on the box next to
// nginx and Portal. A goroutine per client connection, one keep-alive
// connection to the backend per client connection (kept in a pool across
// client connections, as nginx's upstream keepalive does), a request head
// found by scanning for CRLFCRLF and passed on, the response relayed by
// its Content-Length, no TCP keep-alive probes. Nothing else: no routing, no X-Forwarded-*, no
// request bodies (the loads are GETs), no TLS, no timeouts.
//
// The one edit is what any proxy that keeps its endpoint connections must
// do for the new-connection load: a request's "Connection: close" is not
// passed on (the backend would close the pooled connection), and the
// response then says "Connection: close" and the client connection ends.
//
// With -parse, the same proxy also parses every request head with
// http.ReadRequest and every response head with http.ReadResponse (and
// takes Content-Length and the connection's fate from them): the least a
// proxy that uses net/http's parsers must do.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
)

// floorBufferSize is the size of each connection's read buffer; a head
// must fit in it.
const floorBufferSize = 4 << 10

var errHeadTooLarge = errors.New("head larger than the read buffer")

// floorProxy proxies every connection of its listener to one backend.
type floorProxy struct {
	backend string
	parse   bool

	mu   sync.Mutex
	idle []*backendConn
}

// backendConn is a keep-alive connection to the backend with its reader.
type backendConn struct {
	conn net.Conn
	br   *bufio.Reader
}

// runFloor is `bench-ingress floor`: it serves until killed.
func runFloor(args []string) error {
	fs := flag.NewFlagSet("floor", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:18080", "address to serve plain HTTP on")
	backend := fs.String("backend", "10.244.0.10:8080", "the backend's address:port")
	parse := fs.Bool("parse", false, "parse heads with http.ReadRequest and http.ReadResponse")
	fs.Parse(args)
	// No TCP keep-alive probes: Go's default sets them up with four
	// system calls per accepted connection, which nginx does not make.
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(context.Background(), "tcp", *listen)
	if err != nil {
		return err
	}
	p := &floorProxy{backend: *backend, parse: *parse}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go p.serve(c)
	}
}

// get returns an idle backend connection, or a new one.
func (p *floorProxy) get() (*backendConn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		be := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return be, nil
	}
	p.mu.Unlock()
	d := net.Dialer{KeepAlive: -1}
	c, err := d.Dial("tcp", p.backend)
	if err != nil {
		return nil, err
	}
	return &backendConn{conn: c, br: bufio.NewReaderSize(c, floorBufferSize)}, nil
}

func (p *floorProxy) put(be *backendConn) {
	p.mu.Lock()
	p.idle = append(p.idle, be)
	p.mu.Unlock()
}

// clientBuffers are a client connection's reader and the buffers its
// edited heads are written to, reused across connections so that a new
// connection allocates no more than Go's runtime and net package do.
type clientBuffers struct {
	br        *bufio.Reader
	req, resp []byte
}

var clientBufferPool = sync.Pool{New: func() any {
	return &clientBuffers{
		br:   bufio.NewReaderSize(nil, floorBufferSize),
		req:  make([]byte, 0, floorBufferSize),
		resp: make([]byte, 0, floorBufferSize),
	}
}}

// serve proxies one client connection's requests until it ends.
func (p *floorProxy) serve(c net.Conn) {
	defer c.Close()
	bufs := clientBufferPool.Get().(*clientBuffers)
	bufs.br.Reset(c)
	var be *backendConn
	defer func() {
		if be != nil {
			p.put(be)
		}
		bufs.br.Reset(nil)
		clientBufferPool.Put(bufs)
	}()
	br, req := bufs.br, bufs.req
	for {
		head, err := peekHead(br)
		if err != nil {
			return
		}
		var closeClient bool
		req, closeClient = dropConnectionClose(req[:0], head)
		if p.parse {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			closeClient = r.Close
		} else {
			br.Discard(len(head))
		}
		if be == nil {
			if be, err = p.get(); err != nil {
				return
			}
		}
		keep, err := p.exchange(c, be, req, &bufs.resp, closeClient)
		if !keep {
			be.conn.Close()
			be = nil
		}
		if err != nil || closeClient {
			return
		}
	}
}

// exchange sends the request head req on be and relays the response to
// client, ending it with "Connection: close" when closeClient. It says
// whether be can carry another request.
func (p *floorProxy) exchange(client net.Conn, be *backendConn, req []byte, resp *[]byte, closeClient bool) (keep bool, err error) {
	if _, err := be.conn.Write(req); err != nil {
		return false, err
	}
	head, err := peekHead(be.br)
	if err != nil {
		return false, err
	}
	out := head // what the client gets, the backend's head by default
	switch {
	case closeClient:
		*resp = setConnectionClose((*resp)[:0], head)
		out = *resp
	case p.parse: // ReadResponse consumes the buffered head
		*resp = append((*resp)[:0], head...)
		out = *resp
	}
	var n int64
	if p.parse {
		r, err := http.ReadResponse(be.br, nil)
		if err != nil {
			return false, err
		}
		n, keep = r.ContentLength, !r.Close
	} else {
		n, keep = contentLength(head), !hasConnectionClose(head)
		be.br.Discard(len(head))
	}
	if n < 0 {
		return false, errors.New("response without Content-Length")
	}
	return keep, relay(client, out, be, n)
}

// relay writes head and the n-byte body that follows it on be to client:
// with one write when the body is already buffered.
func relay(client net.Conn, head []byte, be *backendConn, n int64) error {
	if int64(be.br.Buffered()) >= n {
		body, _ := be.br.Peek(int(n))
		if _, err := (&net.Buffers{head, body}).WriteTo(client); err != nil {
			return err
		}
		_, err := be.br.Discard(int(n))
		return err
	}
	body, _ := be.br.Peek(be.br.Buffered())
	if _, err := (&net.Buffers{head, body}).WriteTo(client); err != nil {
		return err
	}
	be.br.Discard(len(body))
	_, err := io.CopyN(client, be.conn, n-int64(len(body)))
	return err
}

// peekHead returns the head at the front of br (up to and including its
// CRLFCRLF), reading as needed; the bytes stay buffered.
func peekHead(br *bufio.Reader) ([]byte, error) {
	for {
		buf, _ := br.Peek(br.Buffered())
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			return buf[:i+4], nil
		}
		if len(buf) == br.Size() {
			return nil, errHeadTooLarge
		}
		if _, err := br.Peek(len(buf) + 1); err != nil {
			return nil, err
		}
	}
}

// headerLine finds the first field line of head named name (in lower
// case): the line's bounds, CRLF included, and its value.
func headerLine(head []byte, name string) (start, end int, value []byte) {
	i := bytes.IndexByte(head, '\n') + 1 // past the start line
	for i < len(head) {
		j := bytes.IndexByte(head[i:], '\n')
		if j < 0 {
			break
		}
		line := head[i : i+j+1]
		if len(line) > len(name) && line[len(name)] == ':' && asciiEqualFold(line[:len(name)], name) {
			return i, i + j + 1, bytes.TrimSpace(line[len(name)+1:])
		}
		i += j + 1
	}
	return -1, -1, nil
}

// contentLength is the head's Content-Length, or -1.
func contentLength(head []byte) int64 {
	_, _, v := headerLine(head, "content-length")
	n, err := strconv.ParseInt(string(v), 10, 64)
	if v == nil || err != nil {
		return -1
	}
	return n
}

func hasConnectionClose(head []byte) bool {
	_, _, v := headerLine(head, "connection")
	return asciiEqualFold(v, "close")
}

// dropConnectionClose appends head to dst without its Connection field
// when that says close, and says whether it did.
func dropConnectionClose(dst, head []byte) ([]byte, bool) {
	start, end, v := headerLine(head, "connection")
	if start < 0 || !asciiEqualFold(v, "close") {
		return append(dst, head...), false
	}
	return append(append(dst, head[:start]...), head[end:]...), true
}

// setConnectionClose appends head to dst with its Connection field, added
// if missing, saying close.
func setConnectionClose(dst, head []byte) []byte {
	start, end, _ := headerLine(head, "connection")
	if start < 0 {
		start, end = len(head)-2, len(head)-2
	}
	dst = append(dst, head[:start]...)
	dst = append(dst, "Connection: close\r\n"...)
	return append(dst, head[end:]...)
}

// asciiEqualFold says whether b is s, ASCII letters compared without case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
