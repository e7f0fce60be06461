// Package node is the Node authorizer: it lets a node's agent
// (system:node:NAME in group system:nodes) read the Secrets, ConfigMaps and
// PersistentVolumeClaims, and mint tokens for the ServiceAccounts, of the
// pods bound to its node and of no others, as upstream's Node authorizer
// does. What a node may do with every other resource is the system:node
// ClusterRole's rules, which this package also owns (Rules).
//
// Decisions come from an index of pods by node that the API server's pod
// informer keeps up to date; no request reads etcd. The package decides
// nothing about users other than nodes, and never denies outright: what it
// does not allow falls through to the next authorizer (RBAC), as upstream's
// does. Which objects a node may write is NodeRestriction admission's
// business, not this package's.
package node

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// kind is a type of object a pod refers to by name.
type kind uint8

const (
	secretKind kind = iota
	configMapKind
	pvcKind
	serviceAccountKind
)

// ref names an object a pod refers to, in the pod's namespace.
type ref struct {
	kind            kind
	namespace, name string
}

type podKey struct{ namespace, name string }

// podEntry is what the graph keeps of a pod bound to a node: the node and
// the objects the pod refers to, so that an update or a delete can take
// the pod's old references back out.
type podEntry struct {
	node string
	refs []ref
}

// graph relates nodes to the objects their pods refer to. Its zero value
// is empty and ready to use; it is safe for concurrent use.
type graph struct {
	mu   sync.RWMutex
	pods map[podKey]podEntry
	// nodes counts, for each object, the pods on each node that refer
	// to it: a Secret used by two pods of a node stays readable until
	// both are gone.
	nodes map[ref]map[string]int
}

// setPod records pod as it is now, replacing what was known of it. A pod
// not bound to a node (not yet scheduled) relates to no node.
func (g *graph) setPod(pod *corev1.Pod) {
	key := podKey{pod.Namespace, pod.Name}
	var entry podEntry
	if pod.Spec.NodeName != "" {
		entry = podEntry{node: pod.Spec.NodeName, refs: podRefs(pod)}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(key)
	if entry.node == "" {
		return
	}
	if g.pods == nil {
		g.pods = map[podKey]podEntry{}
		g.nodes = map[ref]map[string]int{}
	}
	g.pods[key] = entry
	for _, r := range entry.refs {
		byNode := g.nodes[r]
		if byNode == nil {
			byNode = map[string]int{}
			g.nodes[r] = byNode
		}
		byNode[entry.node]++
	}
}

// deletePod forgets the pod namespace/name.
func (g *graph) deletePod(namespace, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(podKey{namespace, name})
}

func (g *graph) removeLocked(key podKey) {
	old, ok := g.pods[key]
	if !ok {
		return
	}
	delete(g.pods, key)
	for _, r := range old.refs {
		byNode := g.nodes[r]
		if byNode[old.node]--; byNode[old.node] <= 0 {
			delete(byNode, old.node)
		}
		if len(byNode) == 0 {
			delete(g.nodes, r)
		}
	}
}

// related reports whether a pod bound to node refers to r.
func (g *graph) related(node string, r ref) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.nodes[r][node] > 0
}

// podOnNode reports whether the pod namespace/name is bound to node.
func (g *graph) podOnNode(node, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	e, ok := g.pods[podKey{namespace, name}]
	return ok && e.node == node
}
