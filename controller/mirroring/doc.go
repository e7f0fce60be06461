// Package mirroring is the EndpointSlice mirroring controller: for a
// Service without a selector, whose Endpoints a user or another component
// writes by hand, it keeps EndpointSlices that say the same thing, so that
// consumers of EndpointSlices (proxies, DNS) see those endpoints too. It
// follows kube-controller-manager's endpointslicemirroring controller.
//
// It owns only EndpointSlices labelled
// endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io
// and never touches others, nor any Endpoints. It mirrors nothing for
// Services with a selector (the Endpoints and EndpointSlice controllers
// serve those) or for Endpoints labelled
// endpointslice.kubernetes.io/skip-mirror=true, and deletes its slices
// when either becomes true or the Endpoints or Service goes.
//
// The pure core, [Desired] and [Reconcile], turns an Endpoints and the
// existing mirrored slices into the writes to make; the [Controller] feeds
// it from informers and makes the writes.
package mirroring
