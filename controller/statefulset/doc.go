// Package statefulset is the StatefulSet controller: for every StatefulSet
// it keeps pods with stable names "<set>-<ordinal>", a stable DNS identity
// (hostname and the governing Service as subdomain), created and removed
// in ordinal order or all at once, and rolled to a new template from the
// highest ordinal down, as kube-controller-manager's statefulset
// controller does.
//
// It owns the pods and ControllerRevisions that carry a StatefulSet's
// controller ownerReference, and the StatefulSet's status. It never
// touches pods of other owners nor a pod whose name is not one of the
// set's, and it does not manage storage: volumeClaimTemplates are left to
// the API server to refuse.
//
// The core, [Plan], is pure: a StatefulSet, its revisions and its pods in,
// the pods to create, delete and fix and the status out. The [Controller]
// at the edge feeds it from informers and carries the plan out through the
// API.
package statefulset
