// Package endpointslice is Portal's EndpointSlice controller: for every
// Service with a selector it keeps a set of EndpointSlices, one set per
// address family, listing the Pods the selector matches, as upstream
// Kubernetes' EndpointSlice controller does.
//
// The package owns the EndpointSlices labelled
// endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io and
// nothing else: slices written by users or by other controllers are never
// touched, and Services, Pods and Nodes are only read.
//
// The core is reconcile (reconcile.go), a pure function from a Service, its
// Pods, a snapshot of the Nodes and the existing slices to the slices to
// create, update and delete. It packs endpoints the way upstream's reconciler
// does so that a change to one Pod rewrites at most one slice, and it never
// returns a write whose content equals what is stored. Controller
// (controller.go) is the edge: informers, a rate-limited work queue keyed by
// Service, the API writes, and a tracker of its own writes so that a cache
// that lags behind them causes a retry rather than a second write.
package endpointslice
