//go:build linux

package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/agent/container"
)

// podClosedLinger is how long a forwarded connection that the pod has
// closed waits for the client to close its side, as containerd waits.
const podClosedLinger = time.Second

// portForwardV1 is the port-forward protocol: per connection the client
// opens an error stream and a data stream sharing a requestID and a port.
const portForwardV1 = "portforward.k8s.io"

// servePortForward forwards the client's connections to ports inside the
// pod's network namespace: kubectl port-forward through pods/portforward.
// Each connection is dialled from inside the namespace to localhost, so a
// server bound to 127.0.0.1 in the pod is reached as kubelet reaches it.
func (a *Agent) servePortForward(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("pod")
	pod, pt, err := a.targets(ns, name)
	if err == nil && !pt.up {
		err = fmt.Errorf("pod %s/%s has no sandbox on node %s", ns, name, a.opts.NodeName)
	}
	if err != nil {
		writeStatus(w, http.StatusNotFound, err.Error())
		return
	}
	s := upgradeSPDY(w, r, []string{portForwardV1})
	if s == nil {
		return
	}
	defer s.close()
	f := &forwarder{sess: s, netns: pt.netns, pod: pod, pending: map[string]*streamPair{}}
	f.run(r.Context())
}

// forwarder is one port-forward session.
type forwarder struct {
	sess  *spdySession
	netns string
	pod   *corev1.Pod
	// creationTimeout bounds how long a connection's first stream waits
	// for its other one; 0 is streamCreationTimeout.
	creationTimeout time.Duration

	pending map[string]*streamPair // by requestID, until both streams are open
	expired chan *streamPair
	wg      sync.WaitGroup
}

// streamPair is one forwarded connection's streams.
type streamPair struct {
	id          string
	port        int
	data, error newStream
	timer       *time.Timer
}

// run pairs the streams as they arrive and forwards each complete pair,
// until the client closes the session; it returns once every forwarded
// connection is closed.
func (f *forwarder) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	// Deferred calls run last first: the connections are told to end,
	// then waited for.
	defer f.wg.Wait()
	defer cancel()
	f.expired = make(chan *streamPair)
	defer func() {
		for _, p := range f.pending {
			p.timer.Stop()
		}
	}()
	for {
		select {
		case st := <-f.sess.streams:
			f.add(ctx, st)
		case p := <-f.expired:
			// A pair still half open after the creation timeout is
			// dropped, as kubelet drops it, so a client cannot pin
			// streams for the life of the session.
			if f.pending[p.id] == p {
				f.dropPair(p)
			}
		case <-f.sess.conn.CloseChan():
			return
		}
	}
}

// add files st under its connection's requestID and starts forwarding
// once the connection has both its streams. A stream that does not fit
// (bad port, another port than its partner's, a second stream of a kind)
// is reset, and so is its partner.
func (f *forwarder) add(ctx context.Context, st newStream) {
	h := st.Headers()
	id := h.Get(corev1.PortForwardRequestIDHeader)
	port, err := strconv.Atoi(h.Get(corev1.PortHeader))
	kind := streamType(st)
	if err != nil || port <= 0 || port > 65535 || (kind != corev1.StreamTypeError && kind != corev1.StreamTypeData) {
		f.drop(st)
		return
	}
	p := f.pending[id]
	if p == nil {
		p = &streamPair{id: id, port: port}
		timeout := f.creationTimeout
		if timeout == 0 {
			timeout = streamCreationTimeout
		}
		p.timer = time.AfterFunc(timeout, func() {
			select {
			case f.expired <- p:
			case <-ctx.Done():
			}
		})
		f.pending[id] = p
	}
	slot := &p.data
	if kind == corev1.StreamTypeError {
		slot = &p.error
	}
	if p.port != port || slot.Stream != nil {
		f.drop(st)
		f.dropPair(p)
		return
	}
	*slot = st
	if p.error.Stream == nil || p.data.Stream == nil {
		return
	}
	p.timer.Stop()
	delete(f.pending, id)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for _, r := range []<-chan struct{}{p.data.replySent, p.error.replySent} {
			select {
			case <-r:
			case <-ctx.Done():
				return
			}
		}
		f.forward(ctx, p)
		f.sess.conn.RemoveStreams(p.data, p.error)
	}()
}

// dropPair forgets a connection that will not be forwarded and resets
// the streams it has.
func (f *forwarder) dropPair(p *streamPair) {
	p.timer.Stop()
	delete(f.pending, p.id)
	for _, st := range []newStream{p.data, p.error} {
		if st.Stream != nil {
			f.drop(st)
		}
	}
}

// drop resets st once the client knows it exists.
func (f *forwarder) drop(st newStream) {
	go func() {
		<-st.replySent
		st.Reset()
		f.sess.conn.RemoveStreams(st)
	}()
}

// forward copies one connection both ways, to the pod's loopback (IPv4,
// else IPv6). A port nobody listens on is
// reported on the error stream in kubelet's words, which kubectl prints.
func (f *forwarder) forward(ctx context.Context, p *streamPair) {
	defer p.error.Close()
	port := strconv.Itoa(p.port)
	conn, err := container.DialIn(ctx, f.netns, net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		// A server bound to the IPv6 loopback only, as kubelet also tries.
		if c6, err6 := container.DialIn(ctx, f.netns, net.JoinHostPort("::1", port)); err6 == nil {
			conn, err = c6, nil
		}
	}
	if err != nil {
		fmt.Fprintf(p.error, "error forwarding port %d to pod %s, uid %v: %v", p.port, f.pod.Name, f.pod.UID, err)
		p.data.Reset()
		return
	}
	defer conn.Close()
	// The session ending (client gone) ends every connection of it.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	toPod := make(chan struct{})
	go func() {
		defer close(toPod)
		if _, err := io.Copy(conn, p.data); err != nil {
			conn.Close()
			return
		}
		conn.(*net.TCPConn).CloseWrite()
	}()
	if err := copyFromPod(p.data, conn); err != nil {
		p.data.Reset()
	} else {
		p.data.Close()
	}
	// The pod has closed its side. A client that waits for the error
	// stream before closing its own (kubectl before 1.31, a server that
	// reads to EOF) would wait for ever; as containerd, give the client's
	// side a moment to finish, then end the connection.
	linger := time.NewTimer(podClosedLinger)
	defer linger.Stop()
	select {
	case <-toPod:
		return
	case <-linger.C:
	case <-ctx.Done():
	}
	conn.Close()
	p.data.Reset()
	<-toPod
}

const (
	// smallRead is the size of the pod's first reads: what io.Copy
	// reads, and small enough that connections dropped at once (a client
	// that opens many and goes) put little into the session shared by
	// all before the client's reset arrives.
	smallRead = 32 << 10
	// largeRead is the size of later reads. Large reads make large SPDY
	// frames: fewer frames, messages and writes per byte at every hop up
	// to kubectl.
	largeRead = 256 << 10
	// smallReadBytes is how much a connection carries in small reads
	// before it counts as a long transfer.
	smallReadBytes = 1 << 20
)

// copyFromPod copies what the pod sends to the client's stream until the
// pod closes its side, in small reads first and large ones once the
// connection has carried smallReadBytes.
func copyFromPod(dst io.Writer, src io.Reader) error {
	buf := make([]byte, largeRead)
	size, carried := smallRead, 0
	for {
		n, err := src.Read(buf[:size])
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			if carried += n; carried >= smallReadBytes {
				size = largeRead
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
