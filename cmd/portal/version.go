package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"portal.dev/portal/version"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Portal's version and the Kubernetes API version it serves",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "portal %s (commit %s, Kubernetes API %s)\n",
				version.Version, version.Commit(), version.Kubernetes)
		},
	}
}
