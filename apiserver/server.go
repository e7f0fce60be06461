// Package apiserver runs Portal's Kubernetes-compatible API server: the
// generic k8s.io/apiserver with Portal's registry, storage in embedded or
// external etcd, TLS and authentication, and the loops that keep the API's
// own objects (system namespaces, the kubernetes Service) in place.
package apiserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	genericadmissioninit "k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	baseversion "k8s.io/component-base/version"
	"k8s.io/klog/v2"

	"portal.dev/portal/apiserver/admission/defaultingressclass"
	"portal.dev/portal/apiserver/admission/externalips"
	"portal.dev/portal/apiserver/admission/noderestriction"
	"portal.dev/portal/apiserver/admission/reservedleases"
	saadmission "portal.dev/portal/apiserver/admission/serviceaccount"
	"portal.dev/portal/apiserver/auditlog"
	"portal.dev/portal/apiserver/auth"
	"portal.dev/portal/apiserver/embeddedetcd"
	portalopenapi "portal.dev/portal/apiserver/openapi"
	"portal.dev/portal/apiserver/registry"
	"portal.dev/portal/apiserver/scheme"
	"portal.dev/portal/apiserver/svcconfig"
	"portal.dev/portal/apiserver/ui"
	"portal.dev/portal/apiserver/watchshare"
	"portal.dev/portal/internal/memrelease"
	"portal.dev/portal/pki"
	"portal.dev/portal/version"
)

// Options configure the API server; flag names follow kube-apiserver.
type Options struct {
	DataDir          string
	BindAddress      net.IP
	SecurePort       int
	AdvertiseAddress net.IP

	// EtcdServers empty means: run etcd embedded under DataDir.
	EtcdServers                           []string
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	EtcdPrefix                            string

	// EtcdCompactionInterval is how often the API server compacts etcd's
	// history (kube-apiserver's --etcd-compaction-interval).
	EtcdCompactionInterval time.Duration

	ServiceClusterIPRange string
	ServiceNodePortRange  string
	// ServiceRepairInterval is how often Service IP and port reservations
	// are reconciled with the Services that exist; a leak is freed after
	// two passes.
	ServiceRepairInterval time.Duration
	// ServiceLeakGrace is how long a reservation must have been held by
	// no Service before repair frees it. It must exceed the longest a
	// create can take between reserving and storing (the 60 s request
	// timeout), or repair could rob a create in flight.
	ServiceLeakGrace time.Duration
	ClusterDomain    string

	// ServiceExternalIPCIDRs are the CIDRs any user may put in a
	// Service's spec.externalIPs; other addresses need permission to
	// create services/externalips. Empty allows none without it.
	ServiceExternalIPCIDRs []string

	// EncryptionProviderConfig is an apiserver.config.k8s.io/v1
	// EncryptionConfiguration naming the resources stored encrypted in
	// etcd and with which keys (kube-apiserver's
	// --encryption-provider-config). Empty stores everything as is.
	EncryptionProviderConfig string

	// Audit is the audit log (--audit-log-path, --audit-policy-file).
	Audit auditlog.Options

	// IngressClass, when set, is the name of an IngressClass of
	// IngressController that the server creates at start, marked as the
	// default class, if no IngressClass of that name exists (see
	// ensureIngressClass).
	IngressClass, IngressController string

	// ServiceAccountIssuer is the iss of issued ServiceAccount tokens
	// (kube-apiserver's --service-account-issuer); empty means
	// DefaultServiceAccountIssuer.
	ServiceAccountIssuer string
	// APIAudiences are the audiences a token must name to authenticate to
	// the API (--api-audiences); empty means the issuer.
	APIAudiences []string
	// ServiceAccountSigningKeyFile is the PEM private key tokens are
	// signed with; empty means one the server creates in DataDir.
	ServiceAccountSigningKeyFile string
	// ServiceAccountKeyFiles hold more public keys whose tokens are
	// accepted, as after a key rotation.
	ServiceAccountKeyFiles []string
	// AuthorizationModes are the authorizers of --authorization-mode, in
	// the order they are asked (see auth.ParseModes).
	AuthorizationModes []string

	// ExtraReadyChecks join /readyz, so that it says ok only once
	// in-process components have synced.
	ExtraReadyChecks []healthz.HealthChecker

	// Cluster makes the embedded etcd a member of a cluster of servers.
	Cluster ClusterOptions

	// embedded is the etcd Run started, if it did: storage and the
	// allocator then call it in process.
	embedded *embeddedetcd.Server
	// joinHandler serves other servers' joins, on a cluster member.
	joinHandler http.Handler
	// joinDone says PrepareJoin has run; joinPlan is then the cluster the
	// new member joins (nil for a member restarting).
	joinDone bool
	joinPlan *embeddedetcd.Join
}

// DefaultOptions returns the options a plain `portal apiserver` uses.
func DefaultOptions() Options {
	return Options{
		DataDir:                defaultDataDir(),
		BindAddress:            net.IPv4(127, 0, 0, 1),
		SecurePort:             6443,
		EtcdPrefix:             "/registry",
		EtcdCompactionInterval: 5 * time.Minute,
		ServiceRepairInterval:  3 * time.Minute,
		ServiceLeakGrace:       90 * time.Second,
		ServiceClusterIPRange:  "10.96.0.0/12",
		ServiceNodePortRange:   "30000-32767",
		ClusterDomain:          "cluster.local",
		AuthorizationModes:     auth.DefaultModes,
	}
}

func defaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/portal"
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".portal")
	}
	return ".portal"
}

// AdminKubeconfigPath is where the server writes the admin credential.
func AdminKubeconfigPath(dataDir string) string { return filepath.Join(dataDir, "admin.kubeconfig") }

// Run serves the API until ctx ends.
func Run(ctx context.Context, o Options) error {
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return err
	}
	cidrs, err := ParseServiceCIDRs(o.ServiceClusterIPRange)
	if err != nil {
		return err
	}
	if o.AdvertiseAddress == nil {
		o.AdvertiseAddress = defaultAdvertiseAddress(o.BindAddress)
	}
	if o.AdvertiseAddress.IsLoopback() || o.AdvertiseAddress.IsUnspecified() {
		// The kubernetes Service's endpoints are this address; an
		// EndpointSlice may not hold a loopback one, and no other machine
		// could use it.
		return fmt.Errorf("--advertise-address: %s cannot be the kubernetes Service's endpoint; this machine has no default route to pick another, so set --advertise-address", o.AdvertiseAddress)
	}
	if err := o.ValidateCluster(); err != nil {
		return err
	}
	if len(o.EtcdServers) == 0 {
		etcd, err := startEtcd(ctx, &o)
		if err != nil {
			return err
		}
		defer etcd.Close()
		o.EtcdServers = []string{etcd.Endpoint}
		o.embedded = etcd
		o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile = etcd.CAFile, etcd.CertFile, etcd.KeyFile
	}
	ca, err := pki.LoadOrCreateCA(filepath.Join(o.DataDir, "pki"), "ca")
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	s, err := newServer(o, ca, cidrs)
	if err != nil {
		return err
	}
	// A burst of requests leaves the heap at twice its size for minutes
	// after; give it back once the server is quiet (see memrelease), and
	// the pages of etcd's database the burst touched with it.
	go memrelease.Run(ctx, memrelease.DefaultPolicy, func() {
		if err := o.embedded.ReleaseDatabasePages(); err != nil {
			klog.V(2).InfoS("Could not page out etcd's database", "err", err)
		}
	})
	if l, ok := s.SecureServingInfo.Listener.(*closingListener); ok {
		defer l.stop()
	}
	if err := s.PrepareRun().RunWithContext(ctx); err != nil {
		return err
	}
	if o.Cluster.Leave && o.embedded != nil {
		// ctx has ended; leaving needs a context of its own.
		leaveCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := o.embedded.Leave(leaveCtx); err != nil {
			return fmt.Errorf("--leave: %w", err)
		}
		klog.InfoS("Left the etcd cluster; its data in this data directory is removed", "dataDir", o.DataDir)
	}
	return nil
}

// startEtcd starts the embedded etcd: a member of a cluster of servers
// when asked or started as one before, else the single loopback member.
func startEtcd(ctx context.Context, o *Options) (*embeddedetcd.Server, error) {
	if o.Cluster.member(o.DataDir) {
		return startClusterMember(ctx, o)
	}
	return embeddedetcd.Start(ctx, o.DataDir)
}

// handlerChain wraps the API in the generic filters (authentication,
// authorization, audit...). The service map at /ui/ and the cluster join
// endpoints sit in front of them: the map's page is the login page
// anonymous clients may load and its endpoints authenticate and authorize
// their callers themselves (see ui); a join authenticates with the join
// token (see clusterjoin).
func handlerChain(o Options) func(http.Handler, *genericapiserver.Config) http.Handler {
	return func(h http.Handler, c *genericapiserver.Config) http.Handler {
		view := ui.New(ui.Config{
			Authenticator: c.Authentication.Authenticator, Authorizer: c.Authorization.Authorizer,
			Loopback: c.LoopbackClientConfig, ClusterDomain: o.ClusterDomain, Stop: c.DrainedNotify(),
		})
		return withJoinEndpoints(view.Wrap(genericapiserver.DefaultBuildHandlerChain(withVersion(h), c)), o.joinHandler)
	}
}

func newServer(o Options, ca *pki.CA, cidrs []netip.Prefix) (*genericapiserver.GenericAPIServer, error) {
	config := genericapiserver.NewRecommendedConfig(scheme.Codecs)
	config.EffectiveVersion = basecompatibility.NewEffectiveVersionFromString(baseversion.DefaultKubeBinaryVersion, "", "")
	config.FeatureGate = utilfeature.DefaultFeatureGate
	namer := openapi.NewDefinitionNamer(scheme.Versioned)
	config.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(portalopenapi.GetOpenAPIDefinitions, namer)
	config.OpenAPIConfig.Info.Title, config.OpenAPIConfig.Info.Version = "Kubernetes", baseversion.DefaultKubeBinaryVersion
	config.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(portalopenapi.GetOpenAPIDefinitions, namer)
	config.OpenAPIV3Config.Info.Title, config.OpenAPIV3Config.Info.Version = "Kubernetes", baseversion.DefaultKubeBinaryVersion
	config.LongRunningFunc = longRunning
	config.BuildHandlerChainFunc = handlerChain(o)
	config.ExternalAddress = net.JoinHostPort(o.AdvertiseAddress.String(), fmt.Sprint(o.SecurePort))
	config.PublicAddress = o.AdvertiseAddress

	if err := applyServing(o, ca, cidrs, &config.Config); err != nil {
		return nil, err
	}
	if err := applyStorage(o, &config.Config); err != nil {
		return nil, err
	}
	if err := auditlog.ApplyTo(o.Audit, &config.Config); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	client, err := kubernetes.NewForConfig(config.LoopbackClientConfig)
	if err != nil {
		return nil, err
	}
	config.ClientConfig = config.LoopbackClientConfig
	config.SharedInformerFactory = informers.NewSharedInformerFactory(client, 10*time.Minute)
	serviceAccounts, err := newServiceAccounts(o, config.ExternalAddress, config.SharedInformerFactory, client)
	if err != nil {
		return nil, err
	}
	serviceAccounts.authenticate(&config.Config)
	authz, err := newAuthorization(o.AuthorizationModes, config.SharedInformerFactory)
	if err != nil {
		return nil, err
	}
	config.Authorization.Authorizer = authz.authorizer
	config.RuleResolver = authz.rules
	// The loopback client's token authenticates as system:apiserver in
	// system:masters; it is wired once the authorizer it wraps exists.
	genericapiserver.AuthorizeClientBearerToken(config.LoopbackClientConfig, &config.Authentication, &config.Authorization)
	externalIPCIDRs, err := ParseExternalIPCIDRs(o.ServiceExternalIPCIDRs)
	if err != nil {
		return nil, err
	}
	if err := applyAdmission(config, client, externalIPCIDRs); err != nil {
		return nil, err
	}
	ports, err := svcconfig.ParsePortRange(o.ServiceNodePortRange)
	if err != nil {
		return nil, fmt.Errorf("--service-node-port-range: %w", err)
	}
	svcCfg := svcconfig.ServiceConfig{ClusterIPRanges: cidrs, NodePortRange: ports}
	alloc, etcdClient, err := newAllocator(o, svcCfg)
	if err != nil {
		return nil, err
	}
	config.ReadyzChecks = append(config.ReadyzChecks, allocatorReady(alloc))
	config.ReadyzChecks = append(config.ReadyzChecks, authz.readyCheck())
	config.ReadyzChecks = append(config.ReadyzChecks, o.ExtraReadyChecks...)

	server, err := config.Complete().New("portal-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	agents, err := agentTransport(ca)
	if err != nil {
		return nil, err
	}
	metrics := newMetricsAPI(config.SharedInformerFactory, agents)
	if err := installAPIs(server, config.RESTOptionsGetter, registry.Config{
		Service: svcCfg, Allocator: alloc, AgentTransport: agents, Escalation: authz.escalation,
		Tokens: serviceAccounts.issuer, APIAudiences: serviceAccounts.audiences,
		Authorizer: config.Authorization.Authorizer, Authenticator: config.Authentication.Authenticator,
	}, authz.rules, metrics); err != nil {
		return nil, err
	}
	if err := metrics.addHook(server); err != nil {
		return nil, err
	}
	serviceAccounts.installDiscovery(server)
	if err := addAllocatorHooks(server, alloc, etcdClient, o.ServiceRepairInterval, o.ServiceLeakGrace); err != nil {
		return nil, err
	}
	if err := addBootstrapHooks(server, o, ca, cidrs); err != nil {
		return nil, err
	}
	if err := addRBACBootstrapHook(server); err != nil {
		return nil, err
	}
	return server, nil
}

func applyServing(o Options, ca *pki.CA, cidrs []netip.Prefix, c *genericapiserver.Config) error {
	certFile := filepath.Join(o.DataDir, "pki", "apiserver.crt")
	keyFile := filepath.Join(o.DataDir, "pki", "apiserver.key")
	hosts, ips := servingSANs(o, cidrs)
	if err := ca.EnsureServing(certFile, keyFile, hosts, ips); err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	serving := genericoptions.NewSecureServingOptions()
	serving.BindAddress, serving.BindPort = o.BindAddress, o.SecurePort
	serving.ServerCert.CertKey = genericoptions.CertKey{CertFile: certFile, KeyFile: keyFile}
	// The components of `portal server` each multiplex their watches, one
	// per informer (the garbage collector alone watches every resource),
	// and their requests over one HTTP/2 connection. With the generic
	// server's 100 streams the watches leave little room, and each request
	// beyond it makes the client dial and handshake a TLS connection only
	// to close it again once a stream is free. The number also bounds
	// memory: k8s.io/apiserver sizes a connection's HTTP/2 upload window
	// as 256 KiB per stream times this limit, with no field to set it
	// apart, so a client may make the server hold up to 125 MiB of request
	// bodies per connection at 500 (250 MiB at the 1,000 aggregated API
	// servers allow). 500 is five times the default the watches nearly
	// filled: room for every informer of every component (one watch per
	// resource the garbage collector follows included) plus their requests.
	serving.HTTP2MaxStreamsPerConnection = 500
	if err := serving.WithLoopback().ApplyTo(&c.SecureServing, &c.LoopbackClientConfig); err != nil {
		return err
	}
	c.SecureServing.Listener = newClosingListener(c.SecureServing.Listener, c.DrainedNotify())
	tuneLoopback(c.LoopbackClientConfig)

	caProvider, err := dynamiccertificates.NewStaticCAContent("portal-ca", ca.CertPEM)
	if err != nil {
		return err
	}
	if err := c.Authentication.ApplyClientCert(caProvider, c.SecureServing); err != nil {
		return err
	}
	// The CA is fixed for the process's life, so a verified certificate
	// can be remembered (see auth.CachedCertificates).
	certAuth := auth.CachedCertificates(x509request.NewDynamic(caProvider.VerifyOptions, x509request.CommonNameUserConversion), time.Minute)
	tokens := bearertoken.New(auth.NewTokenFile(TokenFilePath(o.DataDir)))
	// Every authenticated user is in system:authenticated, which the
	// bootstrap policy's discovery and basic-user bindings name, as
	// kube-apiserver adds it; anonymous requests are not.
	c.Authentication.Authenticator = union.New(group.NewAuthenticatedGroupAdder(union.New(certAuth, tokens)), auth.Anonymous)
	return nil
}

// tuneLoopback sets up the API server's client of itself, which its
// admission informers and post-start hooks use.
func tuneLoopback(c *rest.Config) {
	// The loopback client must not share the connection limits of users.
	c.QPS, c.Burst = 200, 400
	// As for the components (see ComponentConfig): the server is on
	// this host, and compressing costs memory and CPU on both ends.
	c.DisableCompression = true
}

// TokenFilePath is the file of hashed bearer tokens the server accepts.
func TokenFilePath(dataDir string) string { return filepath.Join(dataDir, "pki", "tokens") }

func servingSANs(o Options, cidrs []netip.Prefix) ([]string, []net.IP) {
	hosts := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc." + o.ClusterDomain}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, p := range cidrs {
		ips = append(ips, net.IP(FirstServiceIP(p).AsSlice()))
	}
	for _, ip := range []net.IP{o.BindAddress, o.AdvertiseAddress} {
		if ip != nil && !ip.IsUnspecified() {
			ips = append(ips, ip)
		}
	}
	return hosts, ips
}

func applyStorage(o Options, c *genericapiserver.Config) error {
	backend := storagebackend.NewDefaultConfig(o.EtcdPrefix, nil)
	backend.Transport = storagebackend.TransportConfig{
		ServerList:    o.EtcdServers,
		TrustedCAFile: o.EtcdCAFile,
		CertFile:      o.EtcdCertFile,
		KeyFile:       o.EtcdKeyFile,
	}
	backend.CompactionInterval = o.EtcdCompactionInterval
	etcdOpts := genericoptions.NewEtcdOptions(backend)
	etcdOpts.EnableWatchCache = true
	etcdOpts.EnableGarbageCollection = true
	// Each resource's store (see etcdStorage) reads and writes through the
	// transformer this configuration gives it.
	etcdOpts.EncryptionProviderConfigFilepath = o.EncryptionProviderConfig
	if err := etcdOpts.ApplyWithStorageFactoryTo(&storageFactory{base: *backend}, c); err != nil {
		return err
	}
	if o.embedded != nil {
		c.RESTOptionsGetter = newEtcdStorage(c.RESTOptionsGetter, o.embedded.InProcessClient(), o.EtcdCompactionInterval)
	} else {
		client, err := newEtcdClient(o)
		if err != nil {
			return fmt.Errorf("etcd client for the API's storage: %w", err)
		}
		g := newEtcdStorage(c.RESTOptionsGetter, client, o.EtcdCompactionInterval)
		g.closeClient = true
		c.RESTOptionsGetter = g
	}
	// Watchers that keep reading must not be ended as unresponsive when
	// the server is short of CPU (see watchshare).
	c.RESTOptionsGetter = watchshare.Getter{RESTOptionsGetter: c.RESTOptionsGetter}
	return nil
}

func applyAdmission(c *genericapiserver.RecommendedConfig, client kubernetes.Interface, externalIPCIDRs []netip.Prefix) error {
	nsLifecycle, err := lifecycle.NewLifecycle(sets.New("default", "kube-system", "kube-public"))
	if err != nil {
		return err
	}
	init := genericadmissioninit.New(client, nil, c.SharedInformerFactory, c.Authorization.Authorizer, c.FeatureGate, c.EffectiveVersion, c.DrainedNotify(), nil)
	// DefaultIngressClass fills in the class of a new Ingress that names
	// none, as kube-apiserver's default plugin set does.
	ingressClass := defaultingressclass.New()
	// ServiceAccount gives every new pod an account and mounts its token,
	// as kube-apiserver's default plugin set does.
	serviceAccount := saadmission.New()
	// NodeRestriction keeps a node's agent to its own Node, Lease and
	// pods, which the Node authorizer cannot check from the request alone.
	nodeRestriction := noderestriction.New()
	// ServiceExternalIPs keeps spec.externalIPs to those allowed to set
	// them (CVE-2020-8554).
	externalIPs := externalips.New(externalIPCIDRs)
	// PortalReservedLeases keeps the API servers' peer leases and the
	// controller manager's Lease to their owners, which RBAC cannot do
	// for create.
	reservedLeases := reservedleases.New()
	for _, p := range []admission.Interface{nsLifecycle, ingressClass, serviceAccount, nodeRestriction, externalIPs, reservedLeases} {
		init.Initialize(p)
		if err := admission.ValidateInitialization(p); err != nil {
			return err
		}
	}
	c.AdmissionControl = admission.NewChainHandler(nsLifecycle, ingressClass, serviceAccount, nodeRestriction, externalIPs, reservedLeases)
	return nil
}

func longRunning(r *http.Request, ri *apirequest.RequestInfo) bool {
	if ri == nil {
		return false
	}
	if ri.Verb == "watch" {
		return true
	}
	switch ri.Subresource {
	case "log", "exec", "attach", "portforward", "proxy":
		return true
	}
	return false
}

// withVersion answers GET /version with Portal's version info; the generic
// server would report the unset build variables of component-base.
func withVersion(next http.Handler) http.Handler {
	info, _ := json.Marshal(version.Info())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version" && r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			w.Write(info)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func defaultAdvertiseAddress(bind net.IP) net.IP {
	if bind != nil && !bind.IsUnspecified() && !bind.IsLoopback() {
		return bind
	}
	if ip, err := utilnet.ChooseHostInterface(); err == nil {
		return ip
	}
	return net.IPv4(127, 0, 0, 1)
}

// agentTransport is how the API server calls node agents (pods/log): with a
// client certificate from the cluster CA, which agents require. Agents
// serve with self-signed certificates, so, like kube-apiserver without
// --kubelet-certificate-authority, the agent's certificate is not verified.
func agentTransport(ca *pki.CA) (http.RoundTripper, error) {
	certPEM, keyPEM, err := ca.IssueClient(pki.APIServerAgentClientUser, nil)
	if err != nil {
		return nil, fmt.Errorf("agent client certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &http.Transport{
		TLSClientConfig:     &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
	}, nil
}
