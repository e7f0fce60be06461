// Command portal is the Kubernetes Service networking system in one binary.
// Each subcommand only parses flags and starts a component; the components
// live in their own packages.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format json
	"k8s.io/klog/v2"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "kubectl" {
		os.Exit(runKubectl(os.Args[1:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal starts an orderly shutdown, which waits for every
	// component; a second one ends the process at once, as in
	// Kubernetes' components.
	context.AfterFunc(ctx, stop)
	root := newRootCommand()
	root.SetContext(ctx)
	os.Exit(cli.Run(root))
}

func newRootCommand() *cobra.Command {
	// A process applies its logging configuration once; applying the same
	// one again (tests run several commands in one process) is no change.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	logging := logsapi.NewLoggingConfiguration()
	root := &cobra.Command{
		Use:   "portal",
		Short: "Kubernetes Service networking: API server, controllers, DNS, proxy, node agent and Ingress controller",
		// Runs nothing by itself: the subcommands do.
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
		// The command's --config file fills the flags not given first, so
		// that its logging keys count too.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyConfigFile(cmd); err != nil {
				return err
			}
			if err := logsapi.ValidateAndApply(logging, nil); err != nil {
				return err
			}
			// Loggers passed down in contexts keep their values (which
			// pod, which Service), as in Kubernetes' own components
			// since 1.30. Here, not in main: cli.Run turns it off first.
			klog.EnableContextualLogging(true)
			return nil
		},
		SilenceUsage: true,
	}
	// --logging-format (text or json), -v and --vmodule for every
	// component, as Kubernetes' own components have them.
	logsapi.AddFlags(logging, root.PersistentFlags())
	root.AddCommand(
		newServerCommand(),
		newAPIServerCommand(),
		newControllerManagerCommand(),
		newDNSCommand(),
		newProxyCommand(),
		newAgentCommand(),
		newIngressCommand(),
		newKubeconfigCommand(),
		newAPILBCommand(),
		newExplainCommand(),
		newVersionCommand(),
		&cobra.Command{
			Use:                "kubectl",
			Short:              "kubectl, built in; uses the local data directory's admin kubeconfig by default",
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				return fmt.Errorf("unreachable: kubectl is dispatched before flag parsing")
			},
		},
	)
	addConfigFlags(root)
	return root
}

// collectGarbageSooner makes a node component collect garbage when its heap
// is half again its live data instead of Go's double, unless GOGC says
// otherwise: every node pays these components' memory, and they are idle
// most of the time, so the extra collections cost little.
func collectGarbageSooner() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
}
