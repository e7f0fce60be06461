// Package daemonset is Portal's DaemonSet controller: it keeps one Pod of
// each DaemonSet on every Node the DaemonSet's template fits (nodeSelector,
// required node affinity, taints against tolerations, counting the taints a
// cordoned or NotReady Node implies as the scheduler does), replaces failed
// Pods with back-off, rolls out template changes (RollingUpdate with
// maxUnavailable and maxSurge, or OnDelete), records the templates as
// ControllerRevisions and writes the DaemonSet's status, with upstream's
// kube-controller-manager as the reference for each of these.
//
// It creates Pods pinned to their Node by a required matchFields affinity
// on metadata.name and leaves binding them to the scheduler, as upstream
// does. It writes Pods it owns, ControllerRevisions it owns, DaemonSet
// status and Events; it never writes a DaemonSet's spec or a Node.
//
// The decisions are pure functions over listed objects: which Nodes should
// run a Pod (eligible.go), which Pods to create and delete (manage.go),
// which old Pods a rolling update replaces (update.go) and the status
// (status.go). Controller (controller.go) is the edge that lists, writes
// and records; claiming, expectations, resolving owner references, Pod
// writes in slow-start batches and revision naming come from the shared
// toolkit controller/internal/workload.
package daemonset
