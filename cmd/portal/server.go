package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"

	"portal.dev/portal/apiserver"
	"portal.dev/portal/controller/manager"
)

// components are the parts `portal server` can run, in start order. Names
// that are not built yet are accepted by --disable, so scripts written for a
// later Portal keep working.
var components = []string{"apiserver", "controllers", "dns", "proxy", "agent", "ingress"}

// builtComponents are the ones this binary can run.
var builtComponents = []string{"apiserver", "controllers"}

func newServerCommand() *cobra.Command {
	o := apiserver.DefaultOptions()
	mo := manager.DefaultOptions()
	var disable []string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run everything in one process: API server (embedded etcd) and the other components",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if slices.Contains(disable, "apiserver") {
				return fmt.Errorf("--disable apiserver: the server cannot run without its API")
			}
			enabled := func(c string) bool { return !slices.Contains(disable, c) }
			for _, c := range components {
				switch {
				case !enabled(c):
					klog.InfoS("Component disabled", "component", c)
				case !slices.Contains(builtComponents, c):
					klog.V(2).InfoS("Component not built into this version", "component", c)
				}
			}
			return runServer(cmd.Context(), o, mo, enabled)
		},
	}
	addAPIServerFlags(cmd.Flags(), &o)
	addControllerFlags(cmd.Flags(), &mo)
	cmd.Flags().StringSliceVar(&disable, "disable", nil, "components to leave out: "+fmt.Sprint(components[1:]))
	return cmd
}

// runServer runs the API server and, each with its own client as if on
// another machine, the enabled components; /readyz waits for all of them.
func runServer(ctx context.Context, o apiserver.Options, mo manager.Options, enabled func(string) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	if enabled("controllers") {
		if err := mo.Validate(); err != nil {
			return err
		}
		cfg, err := apiserver.ComponentConfig(o, "system:kube-controller-manager")
		if err != nil {
			return err
		}
		if mo.Identity == "" {
			// Stable across restarts of this server, so it takes its Lease
			// back at once instead of waiting for the old one to expire.
			host, _ := os.Hostname()
			mo.Identity = fmt.Sprintf("%s_%x", host, sha256.Sum256([]byte(o.DataDir)))[:len(host)+17]
		}
		mgr := manager.New(cfg, mo)
		o.ExtraReadyChecks = append(o.ExtraReadyChecks, healthz.NamedCheck("controllers", func(*http.Request) error {
			if !mgr.Ready() {
				return fmt.Errorf("controllers not synced")
			}
			return nil
		}))
		go func() { errs <- mgr.Run(ctx) }()
	}
	go func() { errs <- apiserver.Run(ctx, o) }()
	err := <-errs
	cancel()
	return err
}
