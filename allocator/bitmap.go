// Package allocator hands out Service cluster IPs and node ports.
//
// The core is an in-memory bitmap per range (one bit per address or port,
// 32 bytes per 256 addresses) that picks free items in O(1) amortised time,
// preferring the upper band of a range for dynamic allocation and leaving
// the lower band to static requests, as upstream's allocators do. The
// bitmaps are a cache: the authority is a Store of reservations (etcd in the
// API server), written with create-if-absent transactions so that two API
// servers sharing etcd never hand out the same item. This package owns the
// reservations and nothing else; the Service REST layer decides when to
// reserve and release, and a repair loop frees what no Service holds.
//
// The allocator sits below the API server: it returns its own errors
// (ErrFull, ErrNotInRange, RequestErrors naming the field that asked, ...)
// and the API server's registry turns them into field errors. It must not
// import the API server's validation or registry.
package allocator

import (
	"math/bits"
	"math/rand/v2"
)

// Bitmap records which offsets of a range [0, size) are taken.
type Bitmap struct {
	words []uint64
	size  int
	used  int
	// band is the size of the lower band, [0, band), that dynamic
	// allocation uses only when the upper band is full.
	band int
}

// NewBitmap returns an empty bitmap of size items with a lower band of band.
func NewBitmap(size, band int) *Bitmap {
	return &Bitmap{words: make([]uint64, (size+63)/64), size: size, band: band}
}

// Size is the number of items in the range.
func (b *Bitmap) Size() int { return b.size }

// Used is the number of items taken.
func (b *Bitmap) Used() int { return b.used }

// Has reports whether offset i is taken.
func (b *Bitmap) Has(i int) bool {
	return i >= 0 && i < b.size && b.words[i/64]&(1<<(i%64)) != 0
}

// Set marks i taken and reports whether it was free.
func (b *Bitmap) Set(i int) bool {
	if i < 0 || i >= b.size || b.Has(i) {
		return false
	}
	b.words[i/64] |= 1 << (i % 64)
	b.used++
	return true
}

// Clear marks i free.
func (b *Bitmap) Clear(i int) {
	if b.Has(i) {
		b.words[i/64] &^= 1 << (i % 64)
		b.used--
	}
}

// Next returns a free offset, or false when the range is full: a random
// free offset of the upper band, else of the lower band. Starting at a
// random word and scanning whole words keeps it O(1) amortised while the
// range is not nearly full.
func (b *Bitmap) Next(r *rand.Rand) (int, bool) {
	if i, ok := b.nextIn(r, b.band, b.size); ok {
		return i, true
	}
	return b.nextIn(r, 0, b.band)
}

// nextIn returns a free offset in [lo, hi), scanning from a random point
// and wrapping around.
func (b *Bitmap) nextIn(r *rand.Rand, lo, hi int) (int, bool) {
	n := hi - lo
	if n <= 0 {
		return 0, false
	}
	start := lo + r.IntN(n)
	for scanned := 0; scanned < n; {
		i := lo + (start-lo+scanned)%n
		w := b.words[i/64]
		// Free bits of this word from i on, limited to [lo, hi).
		free := ^w &^ (1<<(i%64) - 1)
		if end := i - i%64 + 64; end > hi {
			free &= 1<<(hi%64) - 1
		}
		if free != 0 {
			j := i - i%64 + bits.TrailingZeros64(free)
			if j < hi {
				return j, true
			}
		}
		step := 64 - i%64
		if i+step > hi {
			step = hi - i
		}
		scanned += step
	}
	return 0, false
}

// ipBand is upstream's split of a cluster IP range: a sixteenth of it,
// at least 16 and at most 256 addresses, is kept for static requests.
func ipBand(size int) int {
	if size < 16 {
		return 0
	}
	return min(max(size/16, 16), 256)
}

// portBand is the same split for node ports: a thirty-second, 16 to 128.
func portBand(size int) int {
	if size < 16 {
		return 0
	}
	return min(max(size/32, 16), 128)
}
