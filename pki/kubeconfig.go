package pki

import (
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig is what a client needs to reach and authenticate to the API.
type Kubeconfig struct {
	Server string // https://host:port
	CAPEM  []byte
	User   string
	// Either a client certificate and key, or a bearer token.
	CertPEM, KeyPEM []byte
	Token           string
}

// Bytes renders k as a kubeconfig file with one cluster, user and context,
// all named "portal" except the user, named after k.User.
func (k Kubeconfig) Bytes() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["portal"] = &clientcmdapi.Cluster{Server: k.Server, CertificateAuthorityData: k.CAPEM}
	cfg.AuthInfos[k.User] = &clientcmdapi.AuthInfo{
		ClientCertificateData: k.CertPEM,
		ClientKeyData:         k.KeyPEM,
		Token:                 k.Token,
	}
	cfg.Contexts["portal"] = &clientcmdapi.Context{Cluster: "portal", AuthInfo: k.User, Namespace: "default"}
	cfg.CurrentContext = "portal"
	return clientcmd.Write(*cfg)
}

// WriteKubeconfig writes k to path with mode 0600: it holds a credential.
func WriteKubeconfig(path string, k Kubeconfig) error {
	data, err := k.Bytes()
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, data, 0o600)
}
