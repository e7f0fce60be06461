// Package scheduler is Portal's scheduler: it binds every Pod that names no
// node, and whose schedulerName is empty or DefaultSchedulerName, to a Node
// that fits it, choosing the Node with the fewest Pods bound (ties broken by
// name). A Node fits when it is schedulable and Ready, or the Pod tolerates
// the unschedulable:NoSchedule and not-ready:NoSchedule taints those states
// imply (see controller/internal/nodetaint; DaemonSet Pods tolerate only
// the unschedulable one, and not-ready only with NoExecute), matches the
// Pod's required node affinity and carries no NoSchedule or NoExecute taint
// the Pod does not tolerate.
//
// It writes only Bindings (the pods/binding subresource, as upstream's
// scheduler does), the PodScheduled condition of Pods it cannot place, and
// Events. Pods already bound, and Pods for other schedulers, are never
// touched. Resources, preferred affinity, Pod affinity and preemption are
// not considered.
//
// The core is pick (pick.go), a pure function from a Pod, the Nodes and a
// count of Pods per Node to a Node or the reasons none fits. Scheduler
// (scheduler.go) is the edge: informers, a work queue of pending Pods
// retried with backoff and whenever a Node changes, and the binds it has
// made but not yet seen in its cache, which count as Pods on their Node.
package scheduler
