package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/apiserver"
	"portal.dev/portal/explain"
)

func newExplainCommand() *cobra.Command {
	var (
		kubeconfig, namespace, output, dataDir, domain string
		timeout                                        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "explain svc/NAME | pod/NAME | ingress/NAME | IP[:PORT] | HOST[:PORT]",
		Short: "Say why a Service (or pod, Ingress, address) does or does not answer, step by step along the packet's path",
		Long: `Diagnose a target through the API server only: the Service, what the cluster DNS answers
for it, the pods its selector matches (and the nearest misses), each endpoint (ready, the
readiness probe's last failure, whether targetPort exists on the container, whether anything
listens, asked of the node's agent), what each node's proxy programmed and when, the traffic
policy, the Ingresses pointing at it and how long the last change took to reach every node.

A bare IP[:PORT] finds what answers there: a cluster IP, a node's address with a NodePort, a
load balancer or external IP, a pod. A HOST is a Service's DNS name (NAME.NAMESPACE, with or
without .svc.cluster.local; asked in the wrong namespace it says where the name exists) or an
Ingress host.

Exit status: 0 when the target is reachable (ok or warnings), 1 when a step is broken, 2
when explain itself failed and says nothing about the target (the API server unreachable or
too slow, a bad kubeconfig, a target or flag it does not understand, a bad -o).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				explainFailed(cmd, fmt.Errorf("want one target, got %d", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			broken, err := runExplain(cmd, args[0], explainFlags{kubeconfig, namespace, output, dataDir, domain, timeout})
			if err != nil {
				explainFailed(cmd, err)
			}
			if broken {
				os.Exit(1)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		explainFailed(cmd, err)
		return nil
	})
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig to use (default: $KUBECONFIG, else the data directory's admin kubeconfig)")
	fs.StringVarP(&namespace, "namespace", "n", "default", "namespace of the target")
	fs.StringVarP(&output, "output", "o", "text", "output format: text or json")
	fs.StringVar(&dataDir, "data-dir", apiserver.DefaultOptions().DataDir, "data directory whose admin kubeconfig is the default")
	fs.StringVar(&domain, "cluster-domain", "cluster.local", "the cluster's DNS zone")
	fs.DurationVar(&timeout, "timeout", 10*time.Second, "give up after this long")
	return cmd
}

// explainFlags are portal explain's flags.
type explainFlags struct {
	kubeconfig, namespace, output, dataDir, domain string
	timeout                                        time.Duration
}

// runExplain explains target and writes the report; broken says whether
// a step is broken. An error means there is no verdict on the target.
func runExplain(cmd *cobra.Command, target string, f explainFlags) (broken bool, err error) {
	if f.output != "" && f.output != "json" && f.output != "text" {
		return false, fmt.Errorf("-o %s: want json or text", f.output)
	}
	client, err := explainClient(f.kubeconfig, f.dataDir)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	e := explain.New(explain.Config{Client: client, ClusterDomain: f.domain})
	r, err := e.Explain(ctx, f.namespace, target)
	if err != nil {
		return false, err
	}
	if f.output == "json" {
		err = explain.WriteJSON(cmd.OutOrStdout(), r)
	} else {
		err = explain.WriteText(cmd.OutOrStdout(), r)
	}
	return r.Status == explain.StatusBroken, err
}

// explainFailed ends portal explain with status 2, which scripts tell
// apart from 1 (the target is broken): explain could not say either way.
func explainFailed(cmd *cobra.Command, err error) {
	fmt.Fprintf(cmd.ErrOrStderr(), "Error: %v\n", err)
	os.Exit(2)
}

// explainClient builds the client explain uses: --kubeconfig, else
// $KUBECONFIG, else the admin kubeconfig of the data directory
// ($PORTAL_DATA_DIR overrides --data-dir's default), as portal kubectl.
func explainClient(kubeconfig, dataDir string) (kubernetes.Interface, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		if d := os.Getenv("PORTAL_DATA_DIR"); d != "" {
			dataDir = d
		}
		kubeconfig = apiserver.AdminKubeconfigPath(dataDir)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "portal-explain"
	cfg.QPS, cfg.Burst = 100, 200
	return kubernetes.NewForConfig(cfg)
}
