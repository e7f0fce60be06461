package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Want is what one healthCheckNodePort server should say.
type Want struct {
	Port           int32
	LocalEndpoints int
}

// ServiceServers runs the healthCheckNodePort servers. The zero value is
// not usable; create it with NewServiceServers.
type ServiceServers struct {
	hosts   []string
	listen  func(network, addr string) (net.Listener, error)
	healthy func() bool

	mu      sync.Mutex
	servers map[types.NamespacedName]*serviceServer
}

type serviceServer struct {
	name      types.NamespacedName
	port      int32
	endpoints atomic.Int64
	healthy   func() bool
	srv       *http.Server
	listeners []net.Listener
}

// NewServiceServers returns servers that listen on each of hosts ("" for
// every address) and report the proxy unhealthy when healthy says so.
// listen may be nil for net.Listen.
func NewServiceServers(hosts []string, healthy func() bool, listen func(network, addr string) (net.Listener, error)) *ServiceServers {
	if listen == nil {
		listen = net.Listen
	}
	if len(hosts) == 0 {
		hosts = []string{""}
	}
	return &ServiceServers{hosts: hosts, listen: listen, healthy: healthy, servers: map[types.NamespacedName]*serviceServer{}}
}

// Sync opens a server for every wanted Service, closes the others and
// updates the endpoint counts. A port that cannot be opened is reported
// and tried again at the next Sync.
func (s *ServiceServers) Sync(want map[types.NamespacedName]Want) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for nn, srv := range s.servers {
		if w, ok := want[nn]; !ok || w.Port != srv.port {
			srv.close()
			delete(s.servers, nn)
		}
	}
	var errs []error
	for nn, w := range want {
		srv := s.servers[nn]
		if srv == nil {
			var err error
			if srv, err = s.open(nn, w.Port); err != nil {
				errs = append(errs, err)
				continue
			}
			s.servers[nn] = srv
		}
		srv.endpoints.Store(int64(w.LocalEndpoints))
	}
	return errors.Join(errs...)
}

// Close stops every server.
func (s *ServiceServers) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for nn, srv := range s.servers {
		srv.close()
		delete(s.servers, nn)
	}
}

// Ports returns the open ports by Service, for tests and logs.
func (s *ServiceServers) Ports() map[types.NamespacedName]int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[types.NamespacedName]int32{}
	for nn, srv := range s.servers {
		out[nn] = srv.port
	}
	return out
}

func (s *ServiceServers) open(nn types.NamespacedName, port int32) (*serviceServer, error) {
	srv := &serviceServer{name: nn, port: port, healthy: s.healthy}
	for _, host := range s.hosts {
		l, err := s.listen("tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err != nil {
			for _, l := range srv.listeners {
				l.Close()
			}
			return nil, fmt.Errorf("healthCheckNodePort %d of %s: %w", port, nn, err)
		}
		srv.listeners = append(srv.listeners, l)
	}
	srv.srv = &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	for _, l := range srv.listeners {
		go func() {
			if err := srv.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "healthCheckNodePort server stopped", "service", nn, "port", port)
			}
		}()
	}
	klog.V(2).InfoS("Opened healthCheckNodePort", "service", nn, "port", port)
	return srv, nil
}

func (srv *serviceServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.srv.Shutdown(ctx); err != nil {
		srv.srv.Close()
	}
	klog.V(2).InfoS("Closed healthCheckNodePort", "service", srv.name, "port", srv.port)
}

// healthResponse is the body kube-proxy answers with.
type healthResponse struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

// ServeHTTP answers on any path: 200 when this node has local endpoints
// and the proxy is healthy, 503 otherwise.
func (srv *serviceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var resp healthResponse
	resp.Service.Namespace, resp.Service.Name = srv.name.Namespace, srv.name.Name
	resp.LocalEndpoints = int(srv.endpoints.Load())
	resp.ServiceProxyHealthy = srv.healthy == nil || srv.healthy()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(resp.LocalEndpoints))
	if resp.LocalEndpoints > 0 && resp.ServiceProxyHealthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	body, _ := json.Marshal(resp)
	w.Write(body)
}
