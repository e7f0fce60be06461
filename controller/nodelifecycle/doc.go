// Package nodelifecycle is Portal's node lifecycle controller: it watches the
// heartbeat Leases that node agents renew in kube-node-lease and, when a
// node's Lease has not been renewed for NodeMonitorGracePeriod, sets the
// Node's Ready condition to Unknown and the Ready condition of every Pod bound
// to it to False, so that the endpoint controllers take those Pods out of
// rotation. This is the "node health" half of upstream's node lifecycle
// controller; taints and evictions are not done here.
//
// The package writes only the Ready condition of Node status and the Ready
// condition of Pod status, and only in that direction: it never marks a Node
// or Pod Ready again. A live agent owns both and reports them itself.
//
// The core is healthTracker (health.go), which turns observed Lease renew
// times into a verdict per Node using the controller's own clock, as
// upstream does, so clock skew between a node and the control plane does not
// matter. Controller (controller.go) is the edge: informers, the periodic
// monitor and the API writes.
package nodelifecycle
