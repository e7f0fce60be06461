package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"portal.dev/portal/apiserver"
)

// components are the parts `portal server` can run, in start order. Names
// that are not built yet are accepted by --disable, so scripts written for a
// later Portal keep working.
var components = []string{"apiserver", "controllers", "dns", "proxy", "agent", "ingress"}

// builtComponents are the ones this binary can run.
var builtComponents = []string{"apiserver"}

func newServerCommand() *cobra.Command {
	o := apiserver.DefaultOptions()
	var disable []string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run everything in one process: API server (embedded etcd) and the other components",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if slices.Contains(disable, "apiserver") {
				return fmt.Errorf("--disable apiserver: the server cannot run without its API")
			}
			for _, c := range components {
				switch {
				case slices.Contains(disable, c):
					klog.InfoS("Component disabled", "component", c)
				case !slices.Contains(builtComponents, c):
					klog.V(2).InfoS("Component not built into this version", "component", c)
				}
			}
			return apiserver.Run(cmd.Context(), o)
		},
	}
	addAPIServerFlags(cmd.Flags(), &o)
	cmd.Flags().StringSliceVar(&disable, "disable", nil, "components to leave out: "+fmt.Sprint(components[1:]))
	return cmd
}
