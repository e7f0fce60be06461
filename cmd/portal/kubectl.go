package main

import (
	"os"

	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"portal.dev/portal/apiserver"
)

// runKubectl runs the built-in kubectl with args (args[0] is "kubectl").
// Without --kubeconfig or $KUBECONFIG it uses the admin kubeconfig of the
// data directory ($PORTAL_DATA_DIR, or the default one), as k3s does.
func runKubectl(args []string) int {
	if os.Getenv("KUBECONFIG") == "" && !hasFlag(args, "--kubeconfig") {
		dir := os.Getenv("PORTAL_DATA_DIR")
		if dir == "" {
			dir = apiserver.DefaultOptions().DataDir
		}
		if path := apiserver.AdminKubeconfigPath(dir); fileExists(path) {
			os.Setenv("KUBECONFIG", path)
		}
	}
	saved := os.Args
	os.Args = args
	defer func() { os.Args = saved }()
	cmd := kubectlcmd.NewDefaultKubectlCommand()
	cmd.SetArgs(args[1:])
	if err := cli.RunNoErrOutput(cmd); err != nil {
		cmdutil.CheckErr(err)
		return 1
	}
	return 0
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || len(a) > len(name) && a[:len(name)+1] == name+"=" {
			return true
		}
	}
	return false
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
