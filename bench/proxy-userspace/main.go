// Command proxy-userspace is the open-loop latency client of
// bench/proxy/userspace.sh. wrk measures throughput with a closed loop
// (each connection sends its next request when the last answer arrives),
// so its percentiles at saturation say little about the latency a proxy
// adds. This client sends GET requests at a fixed rate over a fixed set of
// keep-alive connections, whatever the answers do, and reports the
// percentiles of the request latency.
//
// Each request's latency is measured twice: from the moment it was due
// (open loop: time a request waited for a free connection counts, so a
// stall is not hidden) and from the moment it was written (the service
// time of the path under test). At half of the path's peak rate the two
// agree unless something stalls.
//
// With -pcap it reads a packet capture of such a run instead and reports
// the time each request spent inside the proxy (residence.go).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

var (
	addr     = flag.String("addr", "127.0.0.1:8080", "host:port to send the requests to")
	path     = flag.String("path", "/1k.bin", "path to GET")
	rate     = flag.Float64("rate", 10000, "requests per second")
	conns    = flag.Int("conns", 64, "keep-alive connections")
	duration = flag.Duration("duration", 10*time.Second, "how long to send (after -warmup)")
	warmup   = flag.Duration("warmup", time.Second, "requests sent first and not counted")
	name     = flag.String("name", "target", "label of the RESULT line")

	pcap  = flag.String("pcap", "", "instead of sending: read this capture and report the time requests spent in the proxy (see residence.go)")
	front = flag.Uint("front", 0, "with -pcap: the proxy's port")
	back  = flag.Uint("back", 8080, "with -pcap: the backend's port")
)

type sample struct{ fromDue, fromSend time.Duration }

func main() {
	flag.Parse()
	do := run
	if *pcap != "" {
		do = func() error { return residence(*pcap, uint16(*front), uint16(*back), *name) }
	}
	if err := do(); err != nil {
		fmt.Fprintln(os.Stderr, "proxy-userspace:", err)
		os.Exit(1)
	}
}

// results gathers what the connections measured.
type results struct {
	mu      sync.Mutex
	samples []sample
	errs    int
}

// run opens the connections, sends requests on the schedule and reports
// their latency.
func run() error {
	due := make(chan time.Time, 1<<20)
	var res results
	// Each connection tags its requests (?c=N, which nginx ignores for a
	// file), so that a capture can pair the proxy's two sides by content.
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range *conns {
		c, err := net.Dial("tcp", *addr)
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	start := time.Now()
	countFrom := start.Add(*warmup)
	end := countFrom.Add(*duration)
	var wg sync.WaitGroup
	for i, c := range cs {
		req := []byte(fmt.Sprintf("GET %s?c=%d HTTP/1.1\r\nHost: bench\r\n\r\n", *path, i))
		wg.Go(func() { res.client(c, req, due, countFrom) })
	}
	err := schedule(due, start, end)
	close(due)
	wg.Wait()
	if err != nil {
		return err
	}
	return res.report()
}

// client sends req on c for every due time, until due closes or c fails,
// and keeps the latencies of requests due from countFrom on.
func (r *results) client(c net.Conn, req []byte, due <-chan time.Time, countFrom time.Time) {
	br := bufio.NewReaderSize(c, 64<<10)
	var mine []sample
	for d := range due {
		sent := time.Now()
		if _, err := c.Write(req); err != nil {
			r.failed()
			return
		}
		if err := readResponse(br); err != nil {
			r.failed()
			return
		}
		now := time.Now()
		if !d.Before(countFrom) {
			mine = append(mine, sample{now.Sub(d), now.Sub(sent)})
		}
	}
	r.mu.Lock()
	r.samples = append(r.samples, mine...)
	r.mu.Unlock()
}

func (r *results) failed() {
	r.mu.Lock()
	r.errs++
	r.mu.Unlock()
}

// schedule sends request k's due time, start + k/rate, on due when it
// comes, until end. The sender wakes on a kernel timer every 100 us (or
// every interval, if longer) and releases every request that is due.
// Go's own timers wake up to a millisecond late, which would send a
// millisecond's worth of requests at once; a wake-up per request would
// cost the client core a good part of what nginx needs.
func schedule(due chan<- time.Time, start, end time.Time) error {
	interval := time.Duration(float64(time.Second) / *rate)
	tick, err := newTicker(max(interval, 100*time.Microsecond))
	if err != nil {
		return err
	}
	defer tick.Close()
	var b [8]byte
	next := start
	for next.Before(end) {
		if time.Until(next) > 0 {
			if _, err := tick.Read(b[:]); err != nil {
				return err
			}
		}
		now := time.Now()
		for !next.After(now) && next.Before(end) {
			due <- next
			next = next.Add(interval)
		}
	}
	return nil
}

// report prints the latency quantiles, from the due time and from the
// send.
func (r *results) report() error {
	if len(r.samples) == 0 {
		return fmt.Errorf("no answers (%d errors)", r.errs)
	}
	q := func(xs []time.Duration, p float64) string {
		return fmt.Sprintf("%.0f", float64(xs[min(len(xs)-1, int(p*float64(len(xs))))].Microseconds()))
	}
	fromDue := make([]time.Duration, len(r.samples))
	send := make([]time.Duration, len(r.samples))
	for i, s := range r.samples {
		fromDue[i], send[i] = s.fromDue, s.fromSend
	}
	slices.Sort(fromDue)
	slices.Sort(send)
	fmt.Printf("RESULT latency %s rate=%.0f conns=%d n=%d errors=%d p50_us=%s p90_us=%s p99_us=%s p999_us=%s max_us=%s sendp50_us=%s sendp99_us=%s\n",
		*name, *rate, *conns, len(r.samples), r.errs, q(fromDue, 0.5), q(fromDue, 0.9), q(fromDue, 0.99), q(fromDue, 0.999), q(fromDue, 1),
		q(send, 0.5), q(send, 0.99))
	return nil
}

// newTicker returns a timerfd that fires every d: reads block (in Go's
// netpoller) until it has fired.
func newTicker(d time.Duration) (*os.File, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("timerfd_create", err)
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	if err := unix.TimerfdSettime(fd, 0, &unix.ItimerSpec{Interval: ts, Value: ts}, nil); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("timerfd_settime", err)
	}
	return os.NewFile(uintptr(fd), "timerfd"), nil
}

// readResponse reads one HTTP/1.1 response with a Content-Length body
// (nginx serving a static file), without allocating per response.
func readResponse(br *bufio.Reader) error {
	length := -1
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if first {
			if !bytes.HasPrefix(line, []byte("HTTP/1.1 200")) {
				return fmt.Errorf("status %q", bytes.TrimSpace(line))
			}
			continue
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(v))); err != nil {
				return err
			}
		}
	}
	if length < 0 {
		return errors.New("no Content-Length")
	}
	_, err := br.Discard(length)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
