package allocator

import (
	"math/rand/v2"
	"testing"
)

func TestBitmapSetClear(t *testing.T) {
	b := NewBitmap(130, 16)
	if !b.Set(129) || b.Set(129) || !b.Has(129) || b.Used() != 1 {
		t.Fatalf("set 129: has %v used %d", b.Has(129), b.Used())
	}
	if b.Set(130) || b.Set(-1) {
		t.Fatal("set outside the range succeeded")
	}
	b.Clear(129)
	if b.Has(129) || b.Used() != 0 {
		t.Fatalf("after clear: has %v used %d", b.Has(129), b.Used())
	}
}

func TestBitmapNextPrefersUpperBand(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name       string
		size, band int
	}{
		{"one word", 40, 16},
		{"many words", 1000, 62},
		{"word-aligned", 256, 64},
		{"no band", 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBitmap(tc.size, tc.band)
			for n := range tc.size {
				i, ok := b.Next(r)
				if !ok {
					t.Fatalf("full after %d of %d", n, tc.size)
				}
				if n < tc.size-tc.band && i < tc.band {
					t.Fatalf("allocation %d came from the lower band (%d) while the upper had room", n, i)
				}
				if !b.Set(i) {
					t.Fatalf("Next returned taken offset %d", i)
				}
			}
			if _, ok := b.Next(r); ok {
				t.Fatal("Next found room in a full bitmap")
			}
		})
	}
}

func TestBands(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int
	}{
		{"ip /28", ipBand(14), 0},
		{"ip /27", ipBand(30), 16},
		{"ip /24", ipBand(254), 16},
		{"ip /20", ipBand(4094), 255},
		{"ip /12", ipBand(1 << 20), 256},
		{"ports default", portBand(2768), 86},
		{"ports small", portBand(100), 16},
		{"ports big", portBand(60000), 128},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// BenchmarkNext shows allocation stays O(1) as the range fills: the cost of
// the 10,000th pick out of a /12 is that of the first.
func BenchmarkNext(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	bm := NewBitmap(1<<20, 256)
	for range 10000 {
		i, _ := bm.Next(r)
		bm.Set(i)
	}
	b.ResetTimer()
	for range b.N {
		i, _ := bm.Next(r)
		bm.Set(i)
		bm.Clear(i)
	}
}
