package apiserver

import (
	"crypto/tls"
	"fmt"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"

	"portal.dev/portal/apiserver/embeddedetcd"
)

const (
	// etcdDialTimeout bounds a connection attempt to an etcd server.
	etcdDialTimeout = 10 * time.Second
	// etcdKeepAliveTime and etcdKeepAliveTimeout find a dead connection
	// to etcd, which a watch alone would never notice: kube-apiserver's
	// values.
	etcdKeepAliveTime    = 30 * time.Second
	etcdKeepAliveTimeout = 10 * time.Second
)

// newEtcdClient returns a client of the external etcd servers
// (--etcd-servers) with the configured TLS credentials.
func newEtcdClient(o Options) (*clientv3.Client, error) {
	var tlsConfig *tls.Config
	if o.EtcdCertFile != "" || o.EtcdCAFile != "" {
		info := transport.TLSInfo{CertFile: o.EtcdCertFile, KeyFile: o.EtcdKeyFile, TrustedCAFile: o.EtcdCAFile}
		c, err := info.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd TLS: %w", err)
		}
		tlsConfig = c
	}
	return clientv3.New(clientv3.Config{
		Endpoints:            o.EtcdServers,
		TLS:                  tlsConfig,
		DialTimeout:          etcdDialTimeout,
		DialKeepAliveTime:    etcdKeepAliveTime,
		DialKeepAliveTimeout: etcdKeepAliveTimeout,
		Logger:               embeddedetcd.QuietLogger(zapcore.ErrorLevel),
	})
}
