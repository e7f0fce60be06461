package apiserver

import (
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"portal.dev/portal/apiserver/metricsapi"
	"portal.dev/portal/apiserver/registry"
)

// metricsAPI is metrics.k8s.io/v1beta1, what kubectl top reads: storage
// answered from a store that a scraper fills from the node agents'
// /metrics/resource, in the API server itself rather than a separate
// metrics-server.
type metricsAPI struct {
	scraper *metricsapi.Scraper
	synced  []cache.InformerSynced
	storage map[string]rest.Storage
}

// newMetricsAPI builds the storage and the scraper on factory's node and
// pod informers (registered here, before the factory starts); agents is
// the transport with the API server's agent client certificate.
func newMetricsAPI(factory informers.SharedInformerFactory, agents http.RoundTripper) *metricsAPI {
	nodes, pods := factory.Core().V1().Nodes(), factory.Core().V1().Pods()
	store := &metricsapi.Store{}
	return &metricsAPI{
		scraper: &metricsapi.Scraper{Nodes: nodes.Lister(), Store: store,
			Fetch: metricsapi.HTTPFetch(agents, registry.AgentAddress)},
		synced: []cache.InformerSynced{nodes.Informer().HasSynced, pods.Informer().HasSynced},
		storage: map[string]rest.Storage{
			"nodes": metricsapi.NewNodeREST(store, nodes.Lister()),
			"pods":  metricsapi.NewPodREST(store, pods.Lister()),
		},
	}
}

// add puts the group's storage among storages.
func (m *metricsAPI) add(storages map[schema.GroupVersion]map[string]rest.Storage) {
	storages[metricsv1beta1.SchemeGroupVersion] = m.storage
}

// addHook starts scraping once the server runs. It does not hold up
// readiness: figures appear as the nodes are scraped.
func (m *metricsAPI) addHook(s *genericapiserver.GenericAPIServer) error {
	return s.AddPostStartHook("portal-metrics-scraper", func(hc genericapiserver.PostStartHookContext) error {
		go func() {
			if cache.WaitForCacheSync(hc.Context.Done(), m.synced...) {
				m.scraper.Run(hc.Context)
			}
		}()
		return nil
	})
}
