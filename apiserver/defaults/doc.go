// Package defaults fills in the fields upstream Kubernetes defaults on the
// objects Portal serves, mutating k8s.io/api versioned objects in place as
// upstream's SetDefaults_* functions (pkg/apis/*/v1/defaults.go and the
// generated +default tags) do, so stored objects read back the way they
// would from a real cluster.
//
// It also holds the Service defaulting upstream does in its registry rather
// than in SetDefaults: syncing clusterIP with clusterIPs and initialising
// ipFamilies/ipFamilyPolicy from the cluster's configured families
// (ServiceIPFamilies), and the field clean-up on type changes
// (ServiceTypeTransition). Everything here is pure: no clients, no I/O, no
// allocation of IPs or ports.
package defaults
