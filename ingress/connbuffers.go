package ingress

import (
	"bufio"
	"net/http"
	"sync"
)

// connBuffers are what a connection on the loop reuses between its
// requests, kept between connections too: a client that connects for
// each request would otherwise make them afresh each time, 8 KiB and more
// of garbage in five allocations.
type connBuffers struct {
	br *bufio.Reader
	bw *bufio.Writer
	// head is the copy of the request head (h1Conn.head).
	head []byte
	// h is the response's header map (h1Response.h), emptied by its
	// reset.
	h http.Header
}

var connBufferPool = sync.Pool{New: func() any {
	return &connBuffers{br: bufio.NewReaderSize(nil, headBufferSize), bw: bufio.NewWriterSize(nil, headBufferSize)}
}}

// take gives c buffers for its connection.
func (c *h1Conn) take() {
	b := connBufferPool.Get().(*connBuffers)
	c.in.conn = c.conn
	b.br.Reset(&c.in)
	b.bw.Reset(c.conn)
	c.bufs = b
	c.br, c.bw, c.resp.bw = b.br, b.bw, b.bw
	c.head, c.resp.h = b.head[:0], b.h
}

// release returns the buffers once the connection is closed or handed
// over, with nothing left in them that is still needed: a head handed
// over with the connection is not returned (handOff drops it).
func (c *h1Conn) release() {
	b := c.bufs
	b.br.Reset(nil)
	b.bw.Reset(nil)
	b.head, b.h = c.head, c.resp.h
	clear(b.h) // nothing of the last answer kept while pooled
	connBufferPool.Put(b)
	c.bufs, c.br, c.bw, c.resp.bw, c.head, c.resp.h = nil, nil, nil, nil, nil, nil
}
