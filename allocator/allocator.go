package allocator

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"portal.dev/portal/apiserver/svcconfig"
)

// Allocator reserves cluster IPs and node ports for Services.
type Allocator struct {
	cfg   svcconfig.ServiceConfig
	store Store

	mu     sync.Mutex
	ips    map[corev1.IPFamily]*ipPool
	ports  portPool
	rand   *rand.Rand
	synced bool
}

type ipPool struct {
	r    ipRange
	bits *Bitmap
}

type portPool struct {
	r    svcconfig.PortRange
	bits *Bitmap
}

// New returns an allocator for cfg's ranges, recording in store. Call Run
// to keep it in step with other API servers.
func New(cfg svcconfig.ServiceConfig, store Store) *Allocator {
	a := &Allocator{cfg: cfg, store: store, ips: map[corev1.IPFamily]*ipPool{},
		rand: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed))}
	for _, p := range cfg.ClusterIPRanges {
		r := newIPRange(p)
		a.ips[svcconfig.FamilyOfAddr(p.Addr())] = &ipPool{r: r, bits: NewBitmap(r.size, ipBand(r.size))}
	}
	pr := cfg.NodePortRange.OrDefault()
	a.ports = portPool{r: pr, bits: NewBitmap(pr.Size, portBand(pr.Size))}
	return a
}

// Run loads every reservation and follows changes until ctx ends, so the
// bitmaps know what other API servers reserved and released.
func (a *Allocator) Run(ctx context.Context) {
	for ctx.Err() == nil {
		owners, rev, err := a.store.List(ctx)
		if err != nil {
			klog.ErrorS(err, "Listing allocations")
			sleep(ctx, time.Second)
			continue
		}
		a.reset(owners)
		err = a.store.Watch(ctx, rev, a.observe)
		if ctx.Err() == nil {
			klog.InfoS("Allocation watch ended; relisting", "err", err)
			sleep(ctx, 100*time.Millisecond)
		}
	}
}

// Synced reports whether the allocator has loaded the reservations once.
func (a *Allocator) Synced() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.synced
}

func (a *Allocator) reset(owners map[Key]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.ips {
		p.bits = NewBitmap(p.bits.size, p.bits.band)
	}
	a.ports.bits = NewBitmap(a.ports.bits.size, a.ports.bits.band)
	for k := range owners {
		a.markLocked(k, true)
	}
	a.synced = true
}

func (a *Allocator) observe(k Key, owner string, deleted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.markLocked(k, !deleted)
}

// markLocked sets or clears the bit of k; keys outside the ranges (left
// from an older configuration) are ignored here and reported by repair.
func (a *Allocator) markLocked(k Key, taken bool) {
	bits, i, ok := a.locateLocked(k)
	if !ok {
		return
	}
	if taken {
		bits.Set(i)
	} else {
		bits.Clear(i)
	}
}

func (a *Allocator) locateLocked(k Key) (*Bitmap, int, bool) {
	ip, port, err := parseKey(k)
	if err != nil {
		return nil, 0, false
	}
	if ip.IsValid() {
		p := a.ips[svcconfig.FamilyOfAddr(ip)]
		if p == nil {
			return nil, 0, false
		}
		i, ok := p.r.offset(ip)
		return p.bits, i, ok
	}
	if !a.ports.r.Contains(port) {
		return nil, 0, false
	}
	return a.ports.bits, port - a.ports.r.Base, true
}

// pickLocked chooses a free item for slot s and marks it taken.
func (a *Allocator) pickLocked(s *slot) (Key, error) {
	if s.family != "" {
		p := a.ips[s.family]
		if p == nil {
			return "", noRangeError{s.family}
		}
		i, ok := p.bits.Next(a.rand)
		if !ok {
			return "", &FullError{Field: s.field, Index: s.index}
		}
		p.bits.Set(i)
		return ipKey(p.r.addr(i)), nil
	}
	i, ok := a.ports.bits.Next(a.rand)
	if !ok {
		return "", &FullError{Field: s.field, Index: s.index}
	}
	a.ports.bits.Set(i)
	return portKey(a.ports.r.Base + i), nil
}

// freeLocked clears the bit of a key picked but not reserved.
func (a *Allocator) freeLocked(k Key) { a.markLocked(k, false) }

// Used returns how many cluster IPs of family f and node ports are taken.
func (a *Allocator) Used(f corev1.IPFamily) (ips, ports int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.ips[f]; p != nil {
		ips = p.bits.Used()
	}
	return ips, a.ports.bits.Used()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// addrOf returns the address a key reserves (invalid for ports).
func addrOf(k Key) netip.Addr {
	ip, _, _ := parseKey(k)
	return ip
}

// portOf returns the port a key reserves (0 for addresses).
func portOf(k Key) int {
	_, port, _ := parseKey(k)
	return port
}
