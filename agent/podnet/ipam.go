package podnet

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// ErrExhausted means a pod CIDR has no free address.
var ErrExhausted = errors.New("no free address in the pod CIDR")

// IPAM hands out pod addresses from the node's pod CIDRs and keeps each
// allocation as a file named after the address and holding the owner's ID
// under Dir, as the host-local CNI plugin does, so allocations survive an
// agent restart. It is not safe for concurrent use; Network serializes it.
type IPAM struct {
	Dir string
}

// Gateway is the first address of cidr: the bridge's.
func Gateway(cidr netip.Prefix) netip.Addr { return cidr.Masked().Addr().Next() }

// Allocate returns id's address in cidr, allocating the next free one
// after the last handed out when id has none.
func (m IPAM) Allocate(cidr netip.Prefix, id string) (netip.Addr, error) {
	dir := m.dir(cidr)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return netip.Addr{}, err
	}
	held, err := m.byOwner(cidr)
	if err != nil {
		return netip.Addr{}, err
	}
	if a, ok := held[id]; ok {
		return a, nil
	}
	start := Gateway(cidr)
	if data, err := os.ReadFile(filepath.Join(dir, "last")); err == nil {
		if a, err := netip.ParseAddr(strings.TrimSpace(string(data))); err == nil && cidr.Contains(a) {
			start = a
		}
	}
	a := start
	// Bounded: a huge IPv6 CIDR is not scanned to its end.
	for tries := 0; tries < 1<<16; tries++ {
		a = a.Next()
		if !cidr.Contains(a) || isBroadcast(cidr, a) {
			a = Gateway(cidr).Next()
		}
		if !usable(cidr, a) {
			return netip.Addr{}, fmt.Errorf("%s: %w", cidr, ErrExhausted)
		}
		f, err := os.OpenFile(filepath.Join(dir, a.String()), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			_, werr := f.WriteString(id)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				os.Remove(f.Name())
				return netip.Addr{}, werr
			}
			os.WriteFile(filepath.Join(dir, "last"), []byte(a.String()), 0o600)
			return a, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return netip.Addr{}, err
		}
		if a == start {
			break
		}
	}
	return netip.Addr{}, fmt.Errorf("%s: %w", cidr, ErrExhausted)
}

// usable is false only for a CIDR with no pod address at all.
func usable(cidr netip.Prefix, a netip.Addr) bool {
	return cidr.Contains(a) && a != Gateway(cidr) && a != cidr.Masked().Addr() && !isBroadcast(cidr, a)
}

func isBroadcast(cidr netip.Prefix, a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	return !cidr.Contains(a.Next())
}

// Release frees every address id holds in cidr.
func (m IPAM) Release(cidr netip.Prefix, id string) error {
	held, err := m.byOwner(cidr)
	if err != nil {
		return err
	}
	if a, ok := held[id]; ok {
		if err := os.Remove(filepath.Join(m.dir(cidr), a.String())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Owners returns every allocation in cidr by owner.
func (m IPAM) Owners(cidr netip.Prefix) (map[string]netip.Addr, error) { return m.byOwner(cidr) }

func (m IPAM) byOwner(cidr netip.Prefix) (map[string]netip.Addr, error) {
	entries, err := os.ReadDir(m.dir(cidr))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]netip.Addr{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]netip.Addr{}
	for _, e := range entries {
		a, err := netip.ParseAddr(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(m.dir(cidr), e.Name()))
		if err != nil {
			continue
		}
		out[strings.TrimSpace(string(data))] = a
	}
	return out, nil
}

func (m IPAM) dir(cidr netip.Prefix) string {
	return filepath.Join(m.Dir, strings.NewReplacer("/", "_", ":", "-").Replace(cidr.Masked().String()))
}
