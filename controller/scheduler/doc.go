// Package scheduler is Portal's scheduler: it binds every Pod that names no
// node, and whose schedulerName is empty or DefaultSchedulerName, to a Ready,
// schedulable Node whose labels match the Pod's nodeSelector, choosing the
// Node with the fewest Pods bound (ties broken by name).
//
// It writes only Bindings (the pods/binding subresource, as upstream's
// scheduler does), the PodScheduled condition of Pods it cannot place, and
// Events. Pods already bound, and Pods for other schedulers, are never
// touched. Taints, affinity, resources and preemption are not considered.
//
// The core is pick (pick.go), a pure function from a Pod, the Nodes and a
// count of Pods per Node to a Node or the reasons none fits. Scheduler
// (scheduler.go) is the edge: informers, a work queue of pending Pods
// retried with backoff and whenever a Node changes, and the binds it has
// made but not yet seen in its cache, which count as Pods on their Node.
package scheduler
