// Package validation checks the objects Portal serves (k8s.io/api versioned
// types used directly as internal types) the way upstream Kubernetes does:
// the same rules, field paths, error types and messages as
// k8s.io/kubernetes/pkg/apis/{core,discovery,networking,coordination,apps,autoscaling}/validation,
// so that clients see the errors they would see from a real cluster.
//
// Every function is pure: objects in, field.ErrorList out. The package owns
// no state, does no I/O and never mutates its inputs; defaulting lives in
// apiserver/defaults and allocation (IP and port ranges, which produce their
// own errors upstream) in the allocator package, whose errors the registry
// reports.
//
// Validation assumes its input has already been defaulted, as upstream's
// does: for example a Service with no sessionAffinity is rejected here
// because defaulting would have set it.
package validation
