// Package replicaset is the ReplicaSet controller: for every ReplicaSet it
// keeps spec.replicas active Pods matching the selector, as
// kube-controller-manager's replicaset controller does, and reports them in
// the ReplicaSet's status.
//
// It owns Pods through controller ownerReferences: it adopts orphans that
// match a ReplicaSet's selector, releases the Pods that no longer match,
// and creates and deletes only Pods it controls. It writes ReplicaSet
// status and never the spec. Deleting a ReplicaSet's Pods along with it is
// the garbage collector's job, not this package's.
package replicaset
