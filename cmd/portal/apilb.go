package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// newAPILBCommand is `portal api-lb`: the load balancer the components put
// in front of the API servers, offered to clients that take one server
// per cluster, kubectl first. k3s's agent listens on 127.0.0.1:6444 for
// the same reason; this is its port by default.
func newAPILBCommand() *cobra.Command {
	var (
		f               apiFlags
		listen          string
		writeKubeconfig string
	)
	cmd := &cobra.Command{
		Use:   "api-lb --kubeconfig FILE --server URL,URL",
		Short: "Run a load balancer on loopback in front of every API server, for kubectl and other clients that take one server",
		Long: `Listen on --listen and forward each connection to one API server, moving to the next when a
dial or a health check (/readyz with the kubeconfig's credential) fails, as the components'
own balancers do. TLS passes through, so a client keeps its credential and still verifies
the server (the servers' certificates name 127.0.0.1). The servers are the kubeconfig's,
--server's, and those the kubernetes Service's endpoints list.

--write-kubeconfig FILE writes a copy of --kubeconfig whose servers are the balancer, for
kubectl: kubectl --kubeconfig FILE keeps working when the server it used dies.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.kubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required")
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
			if err != nil {
				return err
			}
			lb, err := newAPIBalancer(cfg, f.servers, listen)
			if err != nil {
				return err
			}
			if writeKubeconfig != "" {
				if err := pointKubeconfigAt(f.kubeconfig, writeKubeconfig, lb.through.Host); err != nil {
					return err
				}
				klog.InfoS("Wrote a kubeconfig that goes through the load balancer", "path", writeKubeconfig)
			}
			return lb.run(cmd.Context())
		},
	}
	fs := cmd.Flags()
	f.add(fs, "kubeconfig with the credential that checks the servers' health and lists the kubernetes Service's endpoints, and the first server")
	fs.StringVar(&listen, "listen", "127.0.0.1:6444", "address to listen on; clients reach the API servers through it")
	fs.StringVar(&writeKubeconfig, "write-kubeconfig", "", "write a copy of --kubeconfig pointed at the balancer to this file (mode 0600)")
	return cmd
}

// pointKubeconfigAt writes the kubeconfig at from to to with every
// cluster's server replaced by server. Relative paths of certificate files
// are resolved against from's directory, so the copy works wherever it is.
func pointKubeconfigAt(from, to, server string) error {
	kc, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return err
	}
	if err := clientcmd.ResolveLocalPaths(kc); err != nil {
		return err
	}
	if len(kc.Clusters) == 0 {
		return fmt.Errorf("%s names no cluster", from)
	}
	for _, c := range kc.Clusters {
		c.Server = server
	}
	if err := clientcmd.WriteToFile(*kc, to); err != nil {
		return fmt.Errorf("write %s: %w", to, err)
	}
	return nil
}
