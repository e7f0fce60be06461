// Package podgc is Portal's pod garbage collector, as upstream's podgc
// controller in kube-controller-manager: it force-deletes the Pods no node
// agent will ever finish deleting.
//
//   - Pods bound to a Node that does not exist. A Node missing from the
//     cache is first quarantined for QuarantineTime and then looked up
//     through the API, so a Node that is being created, or a cache that
//     lags, costs no Pod.
//   - Terminating Pods on a Node that is not Ready and carries the
//     node.kubernetes.io/out-of-service taint, which an operator sets to
//     say the node is gone for good.
//   - Terminating Pods on a Node that is not Ready (its Ready condition
//     False or Unknown) once their grace period ended more than
//     NotReadyDeleteMargin ago. Upstream keeps these until an operator
//     sets the out-of-service taint; Portal, whose namespaces would stay
//     Terminating meanwhile, does not wait for that (issue 23).
//   - Terminating Pods that were never bound to a Node.
//
// A Pod it collects is first marked Failed (with a DisruptionTarget
// condition when its Node is gone, so that a Job controller sees why) and
// then deleted with a grace period of 0. It writes nothing else.
//
// As upstream's fourth rule, it also deletes terminated (Succeeded or
// Failed) Pods beyond Options.TerminatedPodThreshold (12,500 as upstream's
// --terminated-pod-gc-threshold), evicted ones first, then the oldest.
//
// The decision (decide.go) is pure: a Pod and what the cache knows of its
// Node in, a reason out. The Controller (controller.go) is the edge.
package podgc
