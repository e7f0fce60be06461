// Package deployment is the Deployment controller: it rolls a
// Deployment's pod template out through ReplicaSets it owns, one per
// template ("<deployment>-<pod-template-hash>"), scaling the new one up
// and the old ones down as the strategy allows, and writes the
// Deployment's status and conditions. It follows upstream
// kube-controller-manager's deployment controller. It writes
// ReplicaSets and Deployment status only; the ReplicaSet controller
// manages the Pods.
package deployment
