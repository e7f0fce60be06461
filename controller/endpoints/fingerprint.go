package endpoints

import (
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// fingerprint hashes what NeedsUpdate compares of ep: its subsets (target
// resourceVersions aside), its labels and its over-capacity annotation.
// The controller notes the fingerprint of each write before sending it, so
// that the write's own event, which may arrive before the API call
// returns, is told apart from someone else's edit by content alone.
func fingerprint(ep *corev1.Endpoints) uint64 {
	h := fnv.New64a()
	field := func(s string) {
		io.WriteString(h, strconv.Itoa(len(s)))
		io.WriteString(h, ":")
		io.WriteString(h, s)
	}
	addresses := func(tag string, as []corev1.EndpointAddress) {
		field(tag + strconv.Itoa(len(as)))
		for _, a := range as {
			field(a.IP)
			field(a.Hostname)
			field(ptr.Deref(a.NodeName, "\x00"))
			if r := a.TargetRef; r != nil {
				field(r.Kind)
				field(r.Namespace)
				field(r.Name)
				field(string(r.UID))
			} else {
				field("\x00")
			}
		}
	}
	field("subsets" + strconv.Itoa(len(ep.Subsets)))
	for _, s := range ep.Subsets {
		addresses("ready", s.Addresses)
		addresses("notReady", s.NotReadyAddresses)
		field("ports" + strconv.Itoa(len(s.Ports)))
		for _, p := range s.Ports {
			field(p.Name)
			field(strconv.Itoa(int(p.Port)))
			field(string(p.Protocol))
			field(ptr.Deref(p.AppProtocol, "\x00"))
		}
	}
	keys := slices.Sorted(maps.Keys(ep.Labels))
	field("labels" + strconv.Itoa(len(keys)))
	for _, k := range keys {
		field(k)
		field(ep.Labels[k])
	}
	v, ok := ep.Annotations[corev1.EndpointsOverCapacity]
	field(strconv.FormatBool(ok) + v)
	return h.Sum64()
}
