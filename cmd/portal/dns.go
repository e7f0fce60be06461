package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"portal.dev/portal/dns"
)

func addDNSFlags(fs *pflag.FlagSet, o *dns.Options) {
	fs.StringSliceVar(&o.BindAddresses, "dns-bind-address", o.BindAddresses, "IPv4 and IPv6 addresses DNS serves UDP and TCP on (repeat or comma-separate)")
	fs.IntVar(&o.Port, "dns-port", o.Port, "DNS port (UDP and TCP)")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "the cluster zone")
	fs.StringSliceVar(&o.Upstream, "upstream", o.Upstream, "servers for names outside the cluster zone: IP, IP:port or a resolv.conf file; none answers REFUSED (default: the nameservers of /etc/resolv.conf, never this server)")
	fs.Var(dns.TTLValue{D: &o.TTL}, "dns-ttl", "TTL of cluster records and of negative answers (seconds, or a duration)")
	fs.StringVar(&o.Pods, "pods", o.Pods, "pod records <a-b-c-d>.<ns>.pod.<zone>: insecure (any IP in an existing namespace), verified (IPs of pods in that namespace) or disabled")
	fs.StringVar(&o.HealthBindAddress, "health-bind-address", o.HealthBindAddress, "address for /health, and /ready as well (plain HTTP; empty disables)")
	fs.StringVar(&o.ReadyBindAddress, "ready-bind-address", o.ReadyBindAddress, "address for /ready alone, CoreDNS's ready port (plain HTTP; empty disables)")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address for /metrics (plain HTTP; empty disables)")
	fs.IntVar(&o.CacheSize, "dns-cache-size", o.CacheSize, "upstream answers to cache (negative disables the cache)")
}

func newDNSCommand() *cobra.Command {
	o := dns.DefaultOptions()
	var api apiFlags
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "Run cluster DNS: the Kubernetes DNS records of the cluster zone, other names forwarded upstream",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			_, client, err := componentClient(cmd.Context(), api, "portal-dns")
			if err != nil {
				return err
			}
			s, err := dns.New(client, o)
			if err != nil {
				return err
			}
			return s.Run(cmd.Context())
		},
	}
	api.add(cmd.Flags(), "kubeconfig of the API server (for example one written by: portal kubeconfig --user system:kube-dns)")
	addDNSFlags(cmd.Flags(), &o)
	return cmd
}
