package gc

import (
	"cmp"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Finalizers the API server sets for foreground and orphan propagation.
const (
	finalizerForeground = metav1.FinalizerDeleteDependents // "foregroundDeletion"
	finalizerOrphan     = metav1.FinalizerOrphanDependents // "orphan"
)

// object is the slice of an object's metadata the collector keeps: who it
// is, where to reach it, whom it belongs to and how it is being deleted.
type object struct {
	// Resource is shared by every object of one resource: the graph keeps
	// an object for every object of every resource for as long as it
	// exists. Use resource().
	Resource  *schema.GroupVersionResource
	Namespace string
	Name      string
	UID       types.UID
	Owners    []metav1.OwnerReference
	// Deleting is set once the object has a deletionTimestamp.
	Deleting bool
	// Foreground and Orphan mirror the two propagation finalizers.
	Foreground bool
	Orphan     bool
}

// resource returns the object's resource, or the zero one.
func (o object) resource() schema.GroupVersionResource {
	if o.Resource == nil {
		return schema.GroupVersionResource{}
	}
	return *o.Resource
}

// deletingDependents reports whether the object waits, in foreground
// deletion, for its blocking dependents to go.
func (o object) deletingDependents() bool { return o.Deleting && o.Foreground }

// orphaning reports whether the object must let go of its dependents
// before it goes.
func (o object) orphaning() bool { return o.Deleting && o.Orphan }

// ownerRef returns o's reference to the owner with uid, if it has one.
func (o object) ownerRef(uid types.UID) (metav1.OwnerReference, bool) {
	i := slices.IndexFunc(o.Owners, func(r metav1.OwnerReference) bool { return r.UID == uid })
	if i < 0 {
		return metav1.OwnerReference{}, false
	}
	return o.Owners[i], true
}

// blocks reports whether o holds up the foreground deletion of owner.
func (o object) blocks(owner types.UID) bool {
	r, ok := o.ownerRef(owner)
	return ok && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
}

// mayBeOwnedBy reports whether an owner in ownerNamespace ("" for a
// cluster-scoped owner) can own o: namespaced objects may have owners in
// their own namespace or cluster-scoped ones, cluster-scoped objects only
// cluster-scoped ones.
func (o object) mayBeOwnedBy(ownerNamespace string) bool {
	return ownerNamespace == "" || ownerNamespace == o.Namespace
}

// graph is the ownership graph: every observed object by UID, and for each
// owner UID (observed or not) the UIDs of the observed objects that name it.
// It also remembers owners a live read found absent, so dependents of one
// gone owner cost one read, not one each. Its methods are safe for
// concurrent use; the ones that change it return the UIDs that need a look.
type graph struct {
	mu sync.Mutex
	// nodes holds the observed objects that are not leaves; leaves holds
	// the others (see leaf), at a fraction of the memory each. An object
	// is in one of the two. classes holds the leaves' shared parts.
	nodes      map[types.UID]object
	leaves     map[uidKey]leaf
	classes    map[classKey]*leafClass
	dependents map[types.UID]map[types.UID]struct{}
	// absent maps an owner UID to the namespaces ("" for cluster scope) in
	// which a live read found it missing.
	absent map[types.UID]map[string]struct{}
}

// get returns the observed object with uid.
func (g *graph) get(uid types.UID) (object, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.getLocked(uid)
}

func (g *graph) getLocked(uid types.UID) (object, bool) {
	if o, ok := g.nodes[uid]; ok {
		return o, true
	}
	if k, ok := parseUID(uid); ok {
		if l, ok := g.leaves[k]; ok {
			return l.object(k), true
		}
	}
	return object{}, false
}

// putLocked records o, as a leaf when it may be one.
func (g *graph) putLocked(o object) {
	if k, ok := leafKey(o); ok {
		g.putLeafLocked(k, o)
		delete(g.nodes, o.UID)
		return
	}
	if g.nodes == nil {
		g.nodes = map[types.UID]object{}
	}
	g.nodes[o.UID] = o
	if k, ok := parseUID(o.UID); ok {
		g.deleteLeafLocked(k)
	}
}

// deleteLocked forgets the object with uid.
func (g *graph) deleteLocked(uid types.UID) {
	delete(g.nodes, uid)
	if k, ok := parseUID(uid); ok {
		g.deleteLeafLocked(k)
	}
}

// len returns the number of observed objects.
func (g *graph) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.nodes) + len(g.leaves)
}

// dependentsOf returns the observed objects that name owner as an owner,
// whatever their namespace.
func (g *graph) dependentsOf(owner types.UID) []object {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []object
	for uid := range g.dependents[owner] {
		o, _ := g.getLocked(uid)
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b object) int { return compareUID(a.UID, b.UID) })
	return out
}

// upsert records o as observed. It returns the UIDs to examine: o itself
// when its owners changed or it started a foreground or orphan deletion,
// o's dependents when it started a foreground deletion, and former owners
// of o that wait for their dependents.
func (g *graph) upsert(o object) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	old, existed := g.getLocked(o.UID)
	g.putLocked(o)
	delete(g.absent, o.UID)
	g.unlinkLocked(old, o)
	g.linkLocked(o)

	var out []types.UID
	if !existed && len(o.Owners) > 0 || existed && !slices.Equal(ownerKeys(old), ownerKeys(o)) {
		out = append(out, o.UID)
		out = append(out, g.waitingOwnersLocked(old, o)...)
	}
	if o.deletingDependents() && !(existed && old.deletingDependents()) {
		out = append(out, o.UID)
		for uid := range g.dependents[o.UID] {
			out = append(out, uid)
		}
	}
	if o.orphaning() && !(existed && old.orphaning()) {
		out = append(out, o.UID)
	}
	return dedupe(out)
}

// remove forgets the object with uid. It returns its dependents, which may
// have lost their last owner, and its owners that wait for their
// dependents.
func (g *graph) remove(uid types.UID) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.removeLocked(uid)
}

// removeOthers forgets the objects of resource whose UIDs keep does not
// hold, as a relist of the resource does. It returns what remove returns
// for each.
func (g *graph) removeOthers(resource *schema.GroupVersionResource, keep map[types.UID]struct{}) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	var gone []types.UID
	for uid, o := range g.nodes {
		if o.Resource == resource && !isKept(keep, uid) {
			gone = append(gone, uid)
		}
	}
	for k, l := range g.leaves {
		if l.class.resource != resource {
			continue
		}
		if uid := k.uid(); !isKept(keep, uid) {
			gone = append(gone, uid)
		}
	}
	var out []types.UID
	for _, uid := range gone {
		out = append(out, g.removeLocked(uid)...)
	}
	return dedupe(out)
}

func isKept(keep map[types.UID]struct{}, uid types.UID) bool {
	_, ok := keep[uid]
	return ok
}

func (g *graph) removeLocked(uid types.UID) []types.UID {
	old, ok := g.getLocked(uid)
	if !ok {
		return nil
	}
	g.deleteLocked(uid)
	g.unlinkLocked(old, object{})
	var out []types.UID
	for dep := range g.dependents[uid] {
		out = append(out, dep)
	}
	out = append(out, g.waitingOwnersLocked(old, object{})...)
	return dedupe(out)
}

// markAbsent records that a live read found no owner with uid in namespace.
func (g *graph) markAbsent(uid types.UID, namespace string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, observed := g.getLocked(uid); observed || len(g.dependents[uid]) == 0 {
		return
	}
	if g.absent == nil {
		g.absent = map[types.UID]map[string]struct{}{}
	}
	if g.absent[uid] == nil {
		g.absent[uid] = map[string]struct{}{}
	}
	g.absent[uid][namespace] = struct{}{}
}

// isAbsent reports whether a live read found no owner with uid in namespace.
func (g *graph) isAbsent(uid types.UID, namespace string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.absent[uid][namespace]
	return ok
}

// waitingOwnersLocked returns the owners of old, no longer blocked by
// current, that are in foreground deletion.
func (g *graph) waitingOwnersLocked(old, current object) []types.UID {
	var out []types.UID
	for _, r := range old.Owners {
		if current.blocks(r.UID) {
			continue
		}
		if owner, ok := g.getLocked(r.UID); ok && owner.deletingDependents() {
			out = append(out, r.UID)
		}
	}
	return out
}

// linkLocked adds o to the dependents of each of its owners.
func (g *graph) linkLocked(o object) {
	if g.dependents == nil {
		g.dependents = map[types.UID]map[types.UID]struct{}{}
	}
	for _, r := range o.Owners {
		if g.dependents[r.UID] == nil {
			g.dependents[r.UID] = map[types.UID]struct{}{}
		}
		g.dependents[r.UID][o.UID] = struct{}{}
	}
}

// unlinkLocked removes old from the dependents of the owners current no
// longer names, and forgets owners left with no dependent.
func (g *graph) unlinkLocked(old, current object) {
	for _, r := range old.Owners {
		if _, still := current.ownerRef(r.UID); still {
			continue
		}
		delete(g.dependents[r.UID], old.UID)
		if len(g.dependents[r.UID]) == 0 {
			delete(g.dependents, r.UID)
			delete(g.absent, r.UID)
		}
	}
}

// ownerKey is what of an owner reference matters to the graph.
type ownerKey struct {
	uid   types.UID
	block bool
}

func ownerKeys(o object) []ownerKey {
	out := make([]ownerKey, 0, len(o.Owners))
	for _, r := range o.Owners {
		out = append(out, ownerKey{r.UID, o.blocks(r.UID)})
	}
	return out
}

func dedupe(uids []types.UID) []types.UID {
	slices.SortFunc(uids, compareUID)
	return slices.Compact(uids)
}

func compareUID(a, b types.UID) int { return cmp.Compare(a, b) }
