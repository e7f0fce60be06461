package gc

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// uidKey is a UID in the canonical form the API server gives every
// object (36 characters, lowercase hexadecimal in groups of 8-4-4-4-12),
// as its 16 bytes: a map key without a string to point at.
type uidKey [16]byte

// uidHyphens are the positions of the hyphens in a canonical UID.
var uidHyphens = [4]int{8, 13, 18, 23}

const hexDigits = "0123456789abcdef"

// parseUID returns uid's key when uid is in canonical form, such that
// key.uid() gives uid back exactly.
func parseUID(uid types.UID) (uidKey, bool) {
	var k uidKey
	if len(uid) != 36 {
		return k, false
	}
	j := 0
	for i := 0; i < 36; i++ {
		if i == uidHyphens[0] || i == uidHyphens[1] || i == uidHyphens[2] || i == uidHyphens[3] {
			if uid[i] != '-' {
				return k, false
			}
			continue
		}
		v := hexValue(uid[i])
		if v < 0 {
			return k, false
		}
		k[j/2] |= byte(v) << (4 * (1 - j%2))
		j++
	}
	return k, true
}

// hexValue is the value of a lowercase hexadecimal digit, or -1.
func hexValue(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

// uid formats k in canonical form.
func (k uidKey) uid() types.UID {
	var b [36]byte
	j := 0
	for i := range b {
		if i == uidHyphens[0] || i == uidHyphens[1] || i == uidHyphens[2] || i == uidHyphens[3] {
			b[i] = '-'
			continue
		}
		b[i] = hexDigits[k[j/2]>>(4*(1-j%2))&0xf]
		j++
	}
	return types.UID(b[:])
}

// leaf is what the graph keeps of an object that names no owner and is
// not being deleted: most objects of a cluster (ConfigMaps, Secrets,
// Services, Deployments). The collector never acts on such an object
// itself; it only reads it as the owner of others, for which its
// resource (for a relist), its namespace (who it may own) and its
// existence are enough. Its name is not kept: an object that gains an
// owner or a deletionTimestamp comes back with its update and is kept in
// full from then on. The resource and namespace are a class that all
// leaves of both share, so that a leaf is one pointer.
type leaf struct{ class *leafClass }

// leafClass is the resource and namespace of some leaves.
type leafClass struct {
	classKey
	refs int // the leaves that point at it
}

type classKey struct {
	resource  *schema.GroupVersionResource
	namespace string
}

// leafKey returns o's key when the graph may keep o as a leaf.
func leafKey(o object) (uidKey, bool) {
	if len(o.Owners) > 0 || o.Deleting || o.Foreground || o.Orphan {
		return uidKey{}, false
	}
	return parseUID(o.UID)
}

// object is the leaf in the graph's object form, without its name.
func (l leaf) object(k uidKey) object {
	return object{Resource: l.class.resource, Namespace: l.class.namespace, UID: k.uid()}
}

// putLeafLocked records o as the leaf with key k.
func (g *graph) putLeafLocked(k uidKey, o object) {
	key := classKey{resource: o.Resource, namespace: o.Namespace}
	c := g.classes[key]
	if c == nil {
		if g.classes == nil {
			g.classes = map[classKey]*leafClass{}
		}
		c = &leafClass{classKey: key}
		g.classes[key] = c
	}
	if old, ok := g.leaves[k]; ok {
		if old.class == c {
			return
		}
		g.releaseLocked(old.class)
	}
	if g.leaves == nil {
		g.leaves = map[uidKey]leaf{}
	}
	c.refs++
	g.leaves[k] = leaf{class: c}
}

// deleteLeafLocked forgets the leaf with key k, if there is one.
func (g *graph) deleteLeafLocked(k uidKey) {
	if l, ok := g.leaves[k]; ok {
		delete(g.leaves, k)
		g.releaseLocked(l.class)
	}
}

// releaseLocked drops a leaf's hold on c, and c with the last.
func (g *graph) releaseLocked(c *leafClass) {
	c.refs--
	if c.refs == 0 {
		delete(g.classes, c.classKey)
	}
}
