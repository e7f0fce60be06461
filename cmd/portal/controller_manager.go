package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/controller/manager"
)

func addControllerFlags(fs *pflag.FlagSet, o *manager.Options) {
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "campaign for the controller-manager Lease; only the leader runs controllers")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a leader's Lease lasts without renewal")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader keeps trying to renew before it steps down")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "how often replicas try to acquire or renew the Lease")
	fs.StringVar(&o.Identity, "identity", o.Identity, "this replica's name in the leader Lease (default: host name and a random suffix)")
	fs.IntVar(&o.MaxEndpointsPerSlice, "max-endpoints-per-slice", o.MaxEndpointsPerSlice, "most endpoints in one EndpointSlice")
	fs.StringVar(&o.LoadBalancerIPPools, "loadbalancer-ip-pools", o.LoadBalancerIPPools, "CIDRs and ranges (192.0.2.10-192.0.2.20) LoadBalancer Services take IPs from")
	fs.DurationVar(&o.NodeMonitorGracePeriod, "node-monitor-grace-period", o.NodeMonitorGracePeriod, "how long a node may miss Lease renewals before it is marked Unknown and its pods not ready")
	fs.IntVar(&o.Workers, "concurrent-syncs", o.Workers, "workers per controller")
}

func newControllerManagerCommand() *cobra.Command {
	o := manager.DefaultOptions()
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers (EndpointSlices, Endpoints, mirroring, garbage collection, LoadBalancer IPs), leader-elected",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if kubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required")
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			return manager.New(cfg, o).Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the API server (e.g. from `portal kubeconfig --user system:kube-controller-manager`)")
	addControllerFlags(cmd.Flags(), &o)
	return cmd
}
