// Package workload holds what the workload controllers (ReplicaSet,
// Deployment, StatefulSet, DaemonSet) share: expectations of their own
// writes, claiming owned objects by controller reference, resolving a Pod's
// owner from the cache, the Pod event handlers, Pods built from a template, creating and deleting
// Pods with expectations kept in step, the order Pods are deleted in,
// ControllerRevision history and slow-start batches of creates. It talks to
// the API only through the functions and clients a controller passes in,
// and keeps no state of its own beyond an Expectations value and the
// informer index ByController adds.
package workload
