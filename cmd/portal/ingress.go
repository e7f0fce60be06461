package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"portal.dev/portal/ingress"
	"portal.dev/portal/internal/gcfloor"
)

// ingressHeapFloor is the least heap goal of `portal ingress`, unless GOGC
// says otherwise. The proxy's live heap is a few MiB with a few Ingresses
// (about 13 MiB with a thousand) and it allocates about 3 KiB per
// request, so with Go's goal of twice the live heap it would collect
// dozens of times a second under load, each time marking the whole live
// heap again. With the floor it collects a third as often or less. A
// higher floor saves less and less CPU for each MiB more: 32 MiB keeps
// the controller's RSS with a thousand Ingresses within a few MiB of
// what it is without. A live heap of 16 MiB or more has a goal of its
// own above the floor, and is left as GOGC says.
const ingressHeapFloor = 32 << 20

// addIngressFlags adds the Ingress controller's flags (ingress-nginx's
// names) to fs.
func addIngressFlags(fs *pflag.FlagSet, o *ingress.Options) {
	fs.IntVar(&o.HTTPPort, "http-port", o.HTTPPort, "port of plain HTTP (0 disables)")
	fs.IntVar(&o.HTTPSPort, "https-port", o.HTTPSPort, "port of HTTPS (0 disables)")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "address HTTP and HTTPS listen on (default: all)")
	fs.StringVar(&o.IngressClass, "ingress-class", o.IngressClass, "name of the IngressClass served (its spec.controller must be portal.dev/ingress)")
	fs.StringVar(&o.WatchNamespace, "watch-namespace", o.WatchNamespace, "serve only the Ingresses of this namespace (default: all)")
	fs.StringVar(&o.DefaultSSLCertificate, "default-ssl-certificate", o.DefaultSSLCertificate, "namespace/name of a kubernetes.io/tls Secret for TLS clients no Ingress has a certificate for (default: a generated one)")
	fs.StringVar(&o.PublishService, "publish-service", o.PublishService, "namespace/name of a Service whose load-balancer addresses are published in Ingress status")
	fs.StringVar(&o.PublishStatusAddress, "publish-status-address", o.PublishStatusAddress, "addresses (comma-separated) published in Ingress status instead")
	fs.StringVar(&o.NodeName, "hostname-override", o.NodeName, "this node's name in the API, whose addresses are published in Ingress status without --publish-service or --publish-status-address (default: the host name, lower-cased)")
	fs.StringVar(&o.ElectionID, "election-id", o.ElectionID, "name of the Lease in kube-system the replicas serving one class campaign for; only its holder writes Ingress status (default: portal-ingress-leader-CLASS; the bootstrap Role lets the ingress identity get and update only portal-ingress-leader-portal, so another name needs a Role granting them)")
	fs.BoolVar(&o.AccessLog, "access-log", o.AccessLog, "write a line per request to standard output (false turns it off)")
	fs.DurationVar(&o.ClientBodyTimeout, "client-body-timeout", o.ClientBodyTimeout, "how long each read of a request body may wait for the client before the request is cut off (0: no limit)")
	fs.DurationVar(&o.ClientSendTimeout, "send-timeout", o.ClientSendTimeout, "how long each write of a response may wait for the client to take it before the connection is closed (0: no limit)")
	fs.BoolVar(&o.TrustForwardedHeaders, "trust-forwarded-headers", o.TrustForwardedHeaders, "keep the X-Forwarded-For/-Proto/-Host/-Port headers clients send (appending to X-Forwarded-For), for a controller behind a proxy that sets them; by default they are replaced, as clients can forge them")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of /metrics and /healthz (empty disables)")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "serve Go's /debug/pprof on the metrics address too")
	fs.StringVar(&o.HealthzBindAddress, "healthz-bind-address", o.HealthzBindAddress, "address of /healthz alone, for probes from outside the node (empty disables)")
}

func newIngressCommand() *cobra.Command {
	o := ingress.DefaultOptions()
	var api apiFlags
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "Run the Ingress controller: HTTP and HTTPS routed by host and path to Service endpoints",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if os.Getenv("GOGC") == "" {
				defer gcfloor.Start(ingressHeapFloor, 100)()
			}
			_, client, err := componentClient(cmd.Context(), api, "portal-ingress")
			if err != nil {
				return err
			}
			c, err := ingress.New(client, o)
			if err != nil {
				return err
			}
			return c.Run(cmd.Context())
		},
	}
	api.add(cmd.Flags(), "kubeconfig of the API server (one from: portal kubeconfig --user system:portal-ingress)")
	addIngressFlags(cmd.Flags(), &o)
	return cmd
}
