// Package forward sends questions outside the cluster zone to upstream
// name servers and caches their answers. It owns the upstream exchange (UDP
// first, TCP when the reply is truncated, the next upstream on failure) and
// a bounded cache that honours record TTLs and, for negative answers, the
// SOA minimum (RFC 2308). It knows nothing of the cluster zone.
package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Options configure a Forwarder.
type Options struct {
	// Upstreams are host:port addresses, tried in turn.
	Upstreams []string
	// CacheSize is the most answers the cache holds (0: no cache).
	CacheSize int
	// Timeout of one exchange with one upstream (default 2s).
	Timeout time.Duration
	// MaxTTL caps how long an answer is cached (default 1h).
	MaxTTL time.Duration
	// Now is the clock (default time.Now), for tests.
	Now func() time.Time
}

// Counters are the forwarder's counts, read by the metrics collector.
type Counters struct {
	CacheHitsSuccess, CacheHitsDenial     atomic.Uint64
	CacheMissesSuccess, CacheMissesDenial atomic.Uint64
	Requests                              atomic.Uint64 // sent upstream
	Failures                              atomic.Uint64 // upstream exchanges that failed
}

// Forwarder forwards queries upstream. Safe for concurrent use.
type Forwarder struct {
	opts     Options
	udp, tcp *dns.Client
	next     atomic.Uint32
	cache    *Cache
	perUp    []atomic.Uint64
	Counters Counters
}

// UpstreamRequests is how many queries went to upstream i.
func (f *Forwarder) UpstreamRequests(i int) uint64 { return f.perUp[i].Load() }

// New returns a Forwarder; it holds no sockets between queries.
func New(o Options) *Forwarder {
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	f := &Forwarder{
		opts:  o,
		udp:   &dns.Client{Net: "udp", Timeout: o.Timeout, UDPSize: dns.DefaultMsgSize},
		tcp:   &dns.Client{Net: "tcp", Timeout: o.Timeout},
		perUp: make([]atomic.Uint64, len(o.Upstreams)),
	}
	if o.CacheSize > 0 {
		f.cache = NewCache(o.CacheSize, o.MaxTTL, o.Now)
	}
	return f
}

// ErrNoUpstream means there is nowhere to forward to.
var ErrNoUpstream = errors.New("no upstream servers")

// Cached returns the cached answer to req, with req's ID and the TTLs aged,
// or nil.
func (f *Forwarder) Cached(req *dns.Msg) *dns.Msg {
	if f.cache == nil || len(req.Question) != 1 {
		return nil
	}
	m := f.cache.Get(req)
	if m != nil {
		if isDenial(m) {
			f.Counters.CacheHitsDenial.Add(1)
		} else {
			f.Counters.CacheHitsSuccess.Add(1)
		}
	}
	return m
}

// Forward answers req from the cache or from the upstreams. The reply has
// req's ID; the caller truncates it to what its client accepts.
func (f *Forwarder) Forward(ctx context.Context, req *dns.Msg) (*dns.Msg, error) {
	if m := f.Cached(req); m != nil {
		return m, nil
	}
	if len(f.opts.Upstreams) == 0 {
		return nil, ErrNoUpstream
	}
	q := new(dns.Msg)
	q.Id = dns.Id()
	q.RecursionDesired = true
	q.CheckingDisabled = req.CheckingDisabled
	q.Question = []dns.Question{req.Question[0]}
	do := false
	if o := req.IsEdns0(); o != nil {
		do = o.Do()
	}
	q.SetEdns0(dns.DefaultMsgSize, do)

	var lastErr error
	start := int(f.next.Add(1))
	for i := range f.opts.Upstreams {
		n := (start + i) % len(f.opts.Upstreams)
		up := f.opts.Upstreams[n]
		f.perUp[n].Add(1)
		resp, err := f.exchange(ctx, q, up)
		if err != nil {
			f.Counters.Failures.Add(1)
			lastErr = err
			continue
		}
		if f.cache != nil {
			if isDenial(resp) {
				f.Counters.CacheMissesDenial.Add(1)
			} else {
				f.Counters.CacheMissesSuccess.Add(1)
			}
			f.cache.Put(req, resp)
		}
		resp.Id = req.Id
		resp.Question = []dns.Question{req.Question[0]} // the client's spelling (0x20 clients check it)
		return resp, nil
	}
	return nil, lastErr
}

// exchange asks one upstream over UDP, and again over TCP when the UDP
// reply is truncated.
func (f *Forwarder) exchange(ctx context.Context, q *dns.Msg, upstream string) (*dns.Msg, error) {
	f.Counters.Requests.Add(1)
	resp, _, err := f.udp.ExchangeContext(ctx, q, upstream)
	if err == nil && resp.Truncated {
		resp, _, err = f.tcp.ExchangeContext(ctx, q, upstream)
	}
	if err != nil {
		return nil, fmt.Errorf("forward to %s: %w", upstream, err)
	}
	if resp.Id != q.Id {
		return nil, fmt.Errorf("forward to %s: reply ID mismatch", upstream)
	}
	return resp, nil
}

func isDenial(m *dns.Msg) bool {
	return m.Rcode == dns.RcodeNameError || (m.Rcode == dns.RcodeSuccess && len(m.Answer) == 0)
}

// Cache holds upstream answers. Its size is bounded: when full, an
// arbitrary entry (Go's map order) makes room, which is cheap and, for a
// cache this size, nearly as good as LRU. Safe for concurrent use.
type Cache struct {
	mu      sync.Mutex
	max     int
	maxTTL  time.Duration
	now     func() time.Time
	entries map[cacheKey]*entry
}

type cacheKey struct {
	name   string
	qtype  uint16
	qclass uint16
	do     bool
	cd     bool
}

type entry struct {
	msg     *dns.Msg
	stored  time.Time
	expires time.Time
}

// NewCache returns a cache of at most size entries.
func NewCache(size int, maxTTL time.Duration, now func() time.Time) *Cache {
	return &Cache{max: size, maxTTL: maxTTL, now: now, entries: make(map[cacheKey]*entry)}
}

func keyFor(req *dns.Msg) cacheKey {
	q := req.Question[0]
	k := cacheKey{name: strings.ToLower(q.Name), qtype: q.Qtype, qclass: q.Qclass, cd: req.CheckingDisabled}
	if o := req.IsEdns0(); o != nil {
		k.do = o.Do()
	}
	return k
}

// Len is the number of entries.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Put stores resp, the upstream's answer to req, for as long as its TTLs
// allow: the smallest TTL of its records for a positive answer, the SOA's
// minimum (capped by the SOA's own TTL) for NXDOMAIN and NODATA. Failures
// and answers without a usable TTL are not stored.
func (c *Cache) Put(req, resp *dns.Msg) {
	ttl, ok := cacheTTL(resp)
	if !ok || ttl == 0 || resp.Truncated {
		return
	}
	d := min(time.Duration(ttl)*time.Second, c.maxTTL)
	now := c.now()
	k := keyFor(req)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; !ok && len(c.entries) >= c.max {
		for old := range c.entries {
			delete(c.entries, old)
			break
		}
	}
	c.entries[k] = &entry{msg: resp.Copy(), stored: now, expires: now.Add(d)}
}

func cacheTTL(m *dns.Msg) (uint32, bool) {
	switch {
	case m.Rcode == dns.RcodeNameError || (m.Rcode == dns.RcodeSuccess && len(m.Answer) == 0):
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				return min(soa.Minttl, soa.Hdr.Ttl), true
			}
		}
		return 0, false // no SOA: RFC 2308 says do not cache
	case m.Rcode == dns.RcodeSuccess:
		ttl := ^uint32(0)
		for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
			for _, rr := range sec {
				if rr.Header().Rrtype == dns.TypeOPT {
					continue
				}
				ttl = min(ttl, rr.Header().Ttl)
			}
		}
		return ttl, true
	}
	return 0, false
}

// Get returns a copy of the entry for req with its TTLs lowered by the time
// it has been cached and req's ID, or nil when there is none or it expired.
func (c *Cache) Get(req *dns.Msg) *dns.Msg {
	k := keyFor(req)
	now := c.now()
	c.mu.Lock()
	e := c.entries[k]
	if e != nil && !now.Before(e.expires) {
		delete(c.entries, k)
		e = nil
	}
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	m := e.msg.Copy()
	m.Id = req.Id
	m.Question = []dns.Question{req.Question[0]}
	age := uint32(now.Sub(e.stored) / time.Second)
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			if h.Rrtype == dns.TypeOPT {
				continue
			}
			if h.Ttl > age {
				h.Ttl -= age
			} else {
				h.Ttl = 0
			}
		}
	}
	return m
}

// IsLocal reports whether host:port upstream names the address and port of
// one of self (the server's own listeners), so that the server never
// forwards to itself. Unspecified listen addresses match every local
// interface address in locals.
func IsLocal(upstream string, self []string, port int, locals []net.IP) bool {
	host, p, err := net.SplitHostPort(upstream)
	if err != nil || p != fmt.Sprint(port) {
		return false
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	for _, s := range self {
		sip := net.ParseIP(s)
		if sip == nil {
			continue
		}
		if sip.Equal(ip) {
			return true
		}
		if sip.IsUnspecified() {
			if ip.IsLoopback() {
				return true
			}
			for _, l := range locals {
				if l.Equal(ip) {
					return true
				}
			}
		}
	}
	return false
}
