package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"portal.dev/portal/apiserver"
	"portal.dev/portal/apiserver/auth"
	"portal.dev/portal/pki"
)

func newKubeconfigCommand() *cobra.Command {
	var (
		dataDir = apiserver.DefaultOptions().DataDir
		user    string
		groups  []string
		server  string
		token   bool
		output  string
	)
	cmd := &cobra.Command{
		Use:   "kubeconfig --user NAME",
		Short: "Mint a credential for a component or person and print its kubeconfig",
		Long: `Mint a credential signed by (or registered with) the cluster in --data-dir and write a
kubeconfig for it. By default the credential is a client certificate, which every API
server sharing the CA accepts; --token registers a bearer token with this data
directory's API server instead. Run it on the API server's machine.

--group sets the credential's groups (repeat it for several). Without it, a well-known
identity gets its usual groups: a node agent's user, system:node:NAME, is in
system:nodes, which the Node authorizer requires; other users are in no group. Portal's
components authenticate as system:kube-proxy, system:kube-dns,
system:kube-controller-manager, system:portal-ingress and system:node:NAME.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if user == "" {
				return fmt.Errorf("--user is required")
			}
			ca, err := pki.LoadCA(filepath.Join(dataDir, "pki", "ca.crt"), filepath.Join(dataDir, "pki", "ca.key"))
			if err != nil {
				return fmt.Errorf("read the cluster CA in %s (has portal server run there?): %w", dataDir, err)
			}
			if !cmd.Flags().Changed("group") {
				groups = auth.DefaultGroups(user)
			}
			if server == "" {
				server = "https://" + net.JoinHostPort("127.0.0.1", "6443")
			}
			kc := pki.Kubeconfig{Server: server, CAPEM: ca.CertPEM, User: user}
			if token {
				kc.Token = randomToken()
				if err := auth.AppendToken(apiserver.TokenFilePath(dataDir), kc.Token, user, groups); err != nil {
					return err
				}
			} else if kc.CertPEM, kc.KeyPEM, err = ca.IssueClient(user, groups); err != nil {
				return err
			}
			if output != "" {
				return pki.WriteKubeconfig(output, kc)
			}
			data, err := kc.Bytes()
			if err != nil {
				return err
			}
			_, err = os.Stdout.Write(data)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&dataDir, "data-dir", dataDir, "data directory of the API server")
	fs.StringVar(&user, "user", "", "user name (certificate CN)")
	fs.StringSliceVar(&groups, "group", nil, "a group of the credential (certificate O), repeatable; system:masters for an administrator (default: the identity's usual groups, system:nodes for system:node:NAME)")
	fs.StringVar(&server, "server", "", "API URL written into the kubeconfig (default https://127.0.0.1:6443)")
	fs.BoolVar(&token, "token", false, "mint a bearer token instead of a client certificate")
	fs.StringVarP(&output, "output", "o", "", "write to this file (mode 0600) instead of standard output")
	return cmd
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
