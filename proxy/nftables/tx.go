//go:build linux

package nftables

import (
	"context"
	"net/netip"

	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/nftables/netlink"
)

// txOps is what a sync writes into: a knftables transaction, or a
// recording the netlink writer encodes.
type txOps interface {
	Add(obj knftables.Object)
	Flush(obj knftables.Object)
	Delete(obj knftables.Object)
}

// batchWriter writes a sync's recording in one transaction; the
// netlink.Writer is one.
type batchWriter interface {
	// Write applies rec atomically; netlink.ErrNotEncodable or
	// netlink.ErrNotSent (wrapped) mean it did nothing and rec must go
	// through knftables.
	Write(ctx context.Context, rec *netlink.Recording) error
	// Wrote says knftables applied rec instead.
	Wrote(rec *netlink.Recording)
}

// addBulkElements adds the endpoint map elements of slots and the
// hairpin elements of addrs: as values into a recording, which keeps
// a full sync from turning them all into text, else one by one.
func addBulkElements(tx txOps, slots []slotRange, addrs []netip.Addr) {
	if rec, ok := tx.(*netlink.Recording); ok {
		for _, r := range slots {
			rec.AddSlots(r.slots())
		}
		rec.AddAddrPairs(hairpinSet, addrs)
		return
	}
	for _, r := range slots {
		for i := range r.eps {
			tx.Add(r.elem(i))
		}
	}
	for _, a := range addrs {
		tx.Add(hairpinElem(a))
	}
}
