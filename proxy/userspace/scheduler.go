package userspace

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
)

// Scheduler names (--scheduler and the portal.dev/scheduler annotation):
// IPVS's set, and maglev.
const (
	SchedulerRoundRobin       = "rr"
	SchedulerRandom           = "random"
	SchedulerLeastConn        = "lc"
	SchedulerSourceHash       = "sh"
	SchedulerDestinationHash  = "dh"
	SchedulerShortestExpected = "sed"
	SchedulerNeverQueue       = "nq"
	SchedulerMaglev           = "maglev"
)

// Schedulers lists every scheduler name.
var Schedulers = []string{SchedulerRoundRobin, SchedulerRandom, SchedulerLeastConn, SchedulerSourceHash,
	SchedulerDestinationHash, SchedulerShortestExpected, SchedulerNeverQueue, SchedulerMaglev}

// ValidScheduler reports whether name is a scheduler.
func ValidScheduler(name string) bool {
	for _, s := range Schedulers {
		if s == name {
			return true
		}
	}
	return false
}

// Conn is what a scheduler may look at: the client and the frontend it
// connected to.
type Conn struct {
	Client   netip.AddrPort
	Frontend netip.AddrPort
}

// Scheduler picks the backend of a new connection. Pick returns an index
// into the backends it was built for that tried does not exclude, or -1
// when all are excluded. Backends are all weight 1.
type Scheduler interface {
	Pick(c Conn, tried func(int) bool) int
}

// loader reports a backend's open connections (lc, sed, nq).
type loader func(i int) int64

// NewScheduler returns scheduler name over n backends whose names (for
// the hashing schedulers) are names and whose open connections load
// reports. An unknown name is round-robin.
func NewScheduler(name string, names []string, load loader) Scheduler {
	n := len(names)
	switch name {
	case SchedulerRandom:
		return randomSched{n: n}
	case SchedulerLeastConn, SchedulerShortestExpected:
		// With equal weights, sed's (active+1)/weight orders backends as
		// lc's active does.
		return &leastSched{n: n, load: load}
	case SchedulerNeverQueue:
		return &leastSched{n: n, load: load, idleFirst: true}
	case SchedulerSourceHash:
		return hashSched{n: n, key: func(c Conn) uint64 { return hashAddr(c.Client.Addr()) }}
	case SchedulerDestinationHash:
		return hashSched{n: n, key: func(c Conn) uint64 { return hashAddr(c.Frontend.Addr()) }}
	case SchedulerMaglev:
		return newMaglev(names)
	}
	return &rrSched{n: n}
}

// next returns the first index from start (wrapping) that tried allows.
func next(start, n int, tried func(int) bool) int {
	for k := range n {
		i := (start + k) % n
		if tried == nil || !tried(i) {
			return i
		}
	}
	return -1
}

type rrSched struct {
	n int
	c atomic.Uint64
}

func (s *rrSched) Pick(_ Conn, tried func(int) bool) int {
	if s.n == 0 {
		return -1
	}
	return next(int((s.c.Add(1)-1)%uint64(s.n)), s.n, tried)
}

type randomSched struct{ n int }

func (s randomSched) Pick(_ Conn, tried func(int) bool) int {
	if s.n == 0 {
		return -1
	}
	return next(rand.IntN(s.n), s.n, tried)
}

type leastSched struct {
	n         int
	load      loader
	idleFirst bool
	c         atomic.Uint64 // rotates the start so ties spread
}

func (s *leastSched) Pick(_ Conn, tried func(int) bool) int {
	if s.n == 0 {
		return -1
	}
	start := int((s.c.Add(1) - 1) % uint64(s.n))
	best, bestLoad := -1, int64(0)
	for k := range s.n {
		i := (start + k) % s.n
		if tried != nil && tried(i) {
			continue
		}
		l := s.load(i)
		if s.idleFirst && l == 0 {
			return i
		}
		if best < 0 || l < bestLoad {
			best, bestLoad = i, l
		}
	}
	return best
}

type hashSched struct {
	n   int
	key func(Conn) uint64
}

func (s hashSched) Pick(c Conn, tried func(int) bool) int {
	if s.n == 0 {
		return -1
	}
	return next(int(s.key(c)%uint64(s.n)), s.n, tried)
}

func hashAddr(a netip.Addr) uint64 {
	h := fnv.New64a()
	b := a.As16()
	h.Write(b[:])
	return h.Sum64()
}

func hashString(s string, seed byte) uint64 {
	h := fnv.New64a()
	h.Write([]byte{seed})
	h.Write([]byte(s))
	return h.Sum64()
}

// maglevSizes are primes. The table size must not change with the
// number of backends, or every change would reshuffle all clients: it is
// the first size at least 100 times the backends, from a short list, so
// it changes only past 40 and 655 backends. At 100 entries per backend
// each one's share is within about 1% of fair.
var maglevSizes = []int{4093, 65521}

// maglev is Google's Maglev consistent hash (NSDI '16): a lookup table
// filled from per-backend permutations, so that adding or removing one
// backend moves only about 1/n of the keys. It hashes the client's
// address and port, so each flow sticks to a backend across proxies and
// across endpoint changes that do not remove it.
type maglev struct {
	table []uint16
}

func newMaglev(names []string) *maglev {
	n := len(names)
	if n == 0 || n >= 0xffff {
		return &maglev{}
	}
	m := maglevSizes[len(maglevSizes)-1]
	for _, size := range maglevSizes {
		if size >= 100*n {
			m = size
			break
		}
	}
	offset := make([]uint64, n)
	skip := make([]uint64, n)
	for i, name := range names {
		offset[i] = hashString(name, 0) % uint64(m)
		skip[i] = hashString(name, 1)%uint64(m-1) + 1
	}
	const empty = 0xffff
	table := make([]uint16, m)
	for i := range table {
		table[i] = empty
	}
	nextIdx := make([]uint64, n)
	filled := 0
	for filled < m {
		for i := range n {
			c := (offset[i] + nextIdx[i]*skip[i]) % uint64(m)
			for table[c] != empty {
				nextIdx[i]++
				c = (offset[i] + nextIdx[i]*skip[i]) % uint64(m)
			}
			table[c] = uint16(i)
			nextIdx[i]++
			filled++
			if filled == m {
				break
			}
		}
	}
	return &maglev{table: table}
}

func (s *maglev) Pick(c Conn, tried func(int) bool) int {
	if len(s.table) == 0 {
		return -1
	}
	h := fnv.New64a()
	b := c.Client.Addr().As16()
	h.Write(b[:])
	h.Write([]byte{byte(c.Client.Port() >> 8), byte(c.Client.Port())})
	start := int(h.Sum64() % uint64(len(s.table)))
	// On a failed backend walk the table: the next entries belong to
	// other backends in the same consistent order on every proxy.
	for k := range len(s.table) {
		i := int(s.table[(start+k)%len(s.table)])
		if tried == nil || !tried(i) {
			return i
		}
	}
	return -1
}

func (s *maglev) String() string { return fmt.Sprintf("maglev(%d)", len(s.table)) }
