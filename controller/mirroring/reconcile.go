package mirroring

import (
	"cmp"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/conversion"
)

// Plan is the set of writes that turns the existing mirrored slices into
// the desired ones.
type Plan struct {
	// Create holds new slices (GenerateName set, no Name).
	Create []*discoveryv1.EndpointSlice
	// Update holds replacements for existing slices, carrying their name
	// and resourceVersion so that a stale cache ends in a conflict.
	Update []*discoveryv1.EndpointSlice
	// Delete holds existing slices to remove.
	Delete []*discoveryv1.EndpointSlice
}

// Empty reports whether the plan writes nothing.
func (p Plan) Empty() bool {
	return len(p.Create) == 0 && len(p.Update) == 0 && len(p.Delete) == 0
}

// Reconcile compares desired slices (from [Desired]) with the existing
// mirrored ones and returns the writes to make. Slices match by address
// family and set of ports: the first existing slice of a kind (by name)
// is kept and updated only if it differs; further ones, and slices of a
// kind no longer wanted, are deleted; a slice that would be deleted while
// another of the same family is created is reused instead, saving a write.
// Neither input is modified.
func Reconcile(desired, existing []*discoveryv1.EndpointSlice) Plan {
	have := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		k := keyOf(s.AddressType, s.Ports)
		have[k] = append(have[k], s)
	}
	var p Plan
	for _, d := range desired {
		k := keyOf(d.AddressType, d.Ports)
		old := sortedByName(have[k])
		delete(have, k)
		switch {
		case len(old) == 0:
			p.Create = append(p.Create, d)
			continue
		case !sameSlice(old[0], d):
			p.Update = append(p.Update, replacing(old[0], d))
		}
		p.Delete = append(p.Delete, old[1:]...)
	}
	for _, k := range slices.Sorted(maps.Keys(have)) {
		p.Delete = append(p.Delete, sortedByName(have[k])...)
	}
	return recycle(p)
}

// recycle turns a create plus a delete of the same address family into
// one update of the slice that was to be deleted.
func recycle(p Plan) Plan {
	var creates []*discoveryv1.EndpointSlice
	for _, c := range p.Create {
		i := slices.IndexFunc(p.Delete, func(d *discoveryv1.EndpointSlice) bool {
			return d.AddressType == c.AddressType
		})
		if i < 0 {
			creates = append(creates, c)
			continue
		}
		p.Update = append(p.Update, replacing(p.Delete[i], c))
		p.Delete = slices.Delete(slices.Clone(p.Delete), i, i+1)
	}
	p.Create = creates
	return p
}

// replacing returns want as an update of the existing slice old.
func replacing(old, want *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	s := want.DeepCopy()
	s.GenerateName = ""
	s.Name = old.Name
	s.ResourceVersion = old.ResourceVersion
	return s
}

func sortedByName(in []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// sameSlice reports whether an existing slice already says what want
// says. Target resourceVersions are ignored: a pod update that changes
// nothing a slice shows is no reason to write.
func sameSlice(have, want *discoveryv1.EndpointSlice) bool {
	return have.AddressType == want.AddressType &&
		equality.Semantic.DeepEqual(have.Labels, want.Labels) &&
		equality.Semantic.DeepEqual(have.Annotations, want.Annotations) &&
		equality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences) &&
		equality.Semantic.DeepEqual(have.Ports, want.Ports) &&
		semanticIgnoringRV.DeepEqual(have.Endpoints, want.Endpoints)
}

var semanticIgnoringRV = conversion.EqualitiesOrDie(
	func(a, b corev1.ObjectReference) bool {
		a.ResourceVersion, b.ResourceVersion = "", ""
		return a == b
	},
)
