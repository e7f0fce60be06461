package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"portal.dev/portal/apiserver"
	"portal.dev/portal/apiserver/auth"
)

func addAPIServerFlags(fs *pflag.FlagSet, o *apiserver.Options) {
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "directory for state: embedded etcd, certificates, admin.kubeconfig")
	fs.IPVar(&o.BindAddress, "bind-address", o.BindAddress, "address the API listens on (0.0.0.0 for all)")
	fs.IntVar(&o.SecurePort, "secure-port", o.SecurePort, "HTTPS port of the API")
	fs.IPVar(&o.AdvertiseAddress, "advertise-address", o.AdvertiseAddress, "address published in the kubernetes Service's endpoints (default: bind address, or the host's primary address)")
	fs.StringSliceVar(&o.EtcdServers, "etcd-servers", o.EtcdServers, "external etcd URLs; empty runs etcd embedded in the data directory")
	fs.StringVar(&o.EtcdCAFile, "etcd-cafile", o.EtcdCAFile, "CA bundle to verify external etcd servers")
	fs.StringVar(&o.EtcdCertFile, "etcd-certfile", o.EtcdCertFile, "client certificate for external etcd")
	fs.StringVar(&o.EtcdKeyFile, "etcd-keyfile", o.EtcdKeyFile, "client key for external etcd")
	fs.DurationVar(&o.EtcdCompactionInterval, "etcd-compaction-interval", o.EtcdCompactionInterval, "how often to compact etcd history; 0 disables")
	fs.StringVar(&o.EtcdPrefix, "etcd-prefix", o.EtcdPrefix, "key prefix in etcd")
	fs.StringVar(&o.ServiceClusterIPRange, "service-cluster-ip-range", o.ServiceClusterIPRange, "CIDR of Service cluster IPs; v4,v6 for dual-stack")
	fs.StringVar(&o.ServiceNodePortRange, "service-node-port-range", o.ServiceNodePortRange, "port range of NodePorts")
	fs.DurationVar(&o.ServiceRepairInterval, "service-repair-interval", o.ServiceRepairInterval, "how often Service IP and port reservations are reconciled with Services (a leak goes after two passes)")
	fs.DurationVar(&o.ServiceLeakGrace, "service-leak-grace", o.ServiceLeakGrace, "how long a reservation must be held by no Service before repair frees it; keep it above the 60s request timeout")
	_ = fs.MarkHidden("service-leak-grace") // for tests
	fs.StringSliceVar(&o.ServiceExternalIPCIDRs, "service-external-ip-cidrs", o.ServiceExternalIPCIDRs, "CIDRs any user may use in a Service's spec.externalIPs; other addresses need create on services/externalips (empty: none)")
	fs.StringVar(&o.EncryptionProviderConfig, "encryption-provider-config", o.EncryptionProviderConfig, "EncryptionConfiguration file (apiserver.config.k8s.io/v1: aescbc, secretbox, identity) deciding which resources are encrypted in etcd")
	fs.StringVar(&o.Audit.Path, "audit-log-path", o.Audit.Path, "file the audit log (audit.k8s.io/v1 events, JSON lines) is appended to; '-' is standard output; empty: no audit log")
	fs.StringVar(&o.Audit.PolicyFile, "audit-policy-file", o.Audit.PolicyFile, "audit.k8s.io/v1 Policy deciding what is logged; without one nothing is. Bodies of Secrets and tokens are never logged")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "cluster DNS domain")
	fs.StringVar(&o.ServiceAccountIssuer, "service-account-issuer", apiserver.DefaultServiceAccountIssuer, "iss of the ServiceAccount tokens the API issues and accepts")
	fs.StringSliceVar(&o.APIAudiences, "api-audiences", o.APIAudiences, "audiences a token must name to authenticate to the API (default: the service account issuer)")
	fs.StringVar(&o.ServiceAccountSigningKeyFile, "service-account-signing-key-file", o.ServiceAccountSigningKeyFile, "PEM private key to sign ServiceAccount tokens with (default: one created in the data directory)")
	fs.StringSliceVar(&o.ServiceAccountKeyFiles, "service-account-key-file", o.ServiceAccountKeyFiles, "PEM files of more public keys whose ServiceAccount tokens are accepted")
	fs.Var((*modesValue)(&o.AuthorizationModes), "authorization-mode",
		"ordered comma list of authorizers after system:masters: AlwaysAllow, Node, RBAC")
	addClusterFlags(fs, &o.Cluster)
}

// addClusterFlags adds the flags that make the embedded etcd a cluster of
// servers, named as k3s names them where it has them.
func addClusterFlags(fs *pflag.FlagSet, c *apiserver.ClusterOptions) {
	fs.BoolVar(&c.Init, "cluster-init", c.Init, "start a one-member embedded etcd cluster that other servers can join with --join and the token this server stores in its data directory (file \"token\")")
	fs.StringVar(&c.Join, "join", c.Join, "https URL of a server of the embedded etcd cluster to join (needs --token or --token-file); ignored once the data directory is a member")
	fs.StringVar(&c.Token, "token", c.Token, "join token of the cluster: on the first server the secret to use (default: one it makes), on others the token from the first server's data directory")
	fs.StringVar(&c.TokenFile, "token-file", c.TokenFile, "file that holds the join token, instead of --token (which every local user can read in the process's command line)")
	fs.BoolVar(&c.Leave, "leave", c.Leave, "on a clean shutdown, remove this server's member from the embedded etcd cluster and its etcd data from the data directory")
	fs.IntVar(&c.PeerPort, "etcd-peer-port", apiserver.DefaultEtcdPeerPort, "port the embedded etcd's peers dial on the advertise address, with --cluster-init or --join")
}

// modesValue is the --authorization-mode flag: a comma list of known
// modes, each once.
type modesValue []string

func (m *modesValue) String() string { return strings.Join(*m, ",") }
func (m *modesValue) Type() string   { return "strings" }

func (m *modesValue) Set(v string) error {
	modes, err := auth.ParseModes(v)
	if err != nil {
		return err
	}
	*m = modes
	return nil
}

func newAPIServerCommand() *cobra.Command {
	o := apiserver.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "apiserver",
		Short: "Run the API server only",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return apiserver.Run(cmd.Context(), o)
		},
	}
	addAPIServerFlags(cmd.Flags(), &o)
	return cmd
}
