// Package serviceaccount is Portal's serviceaccounts controller, as
// upstream's in kube-controller-manager: every active namespace holds a
// ServiceAccount named "default", created when the namespace appears and
// again whenever it is deleted, so that a pod which names no account
// always has one to run as.
//
// It only creates: an existing "default" account is never changed, and a
// namespace that is being deleted gets none (the API would refuse it).
package serviceaccount
