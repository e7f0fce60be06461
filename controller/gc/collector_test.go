package gc

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	nodes      = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// served is what the fake discovery serves: namespaced configmaps and
// secrets, cluster-scoped nodes, and events, which the collector ignores.
var served = []*metav1.APIResourceList{{
	GroupVersion: "v1",
	APIResources: []metav1.APIResource{
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: []string{"get", "list", "watch", "delete", "patch"}},
		{Name: "secrets", Kind: "Secret", Namespaced: true, Verbs: []string{"get", "list", "watch", "delete", "patch"}},
		{Name: "nodes", Kind: "Node", Verbs: []string{"get", "list", "watch", "delete", "patch"}},
		{Name: "events", Kind: "Event", Namespaced: true, Verbs: []string{"get", "list", "watch", "delete"}},
	},
}}

// pom builds an object of kind ("ConfigMap", "Secret" or "Node").
func pom(kind, ns, name, uid string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), OwnerReferences: owners},
	}
}

// ownedBy is a reference to o.
func ownedBy(o *metav1.PartialObjectMetadata, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID, BlockOwnerDeletion: &block}
}

// deleting marks o as deleted with finalizers.
func deleting(o *metav1.PartialObjectMetadata, finalizers ...string) *metav1.PartialObjectMetadata {
	now := metav1.Now()
	o.DeletionTimestamp = &now
	o.Finalizers = finalizers
	return o
}

// testEnv is a Collector running against fake clients.
type testEnv struct {
	t      *testing.T
	client *metadatafake.FakeMetadataClient
	c      *Collector
}

// run starts a Collector over objs, lets it settle, calls check and stops
// it, all inside a synctest bubble, so retries and periods take no time.
func run(t *testing.T, objs []*metav1.PartialObjectMetadata, check func(e *testEnv)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		scheme := metadatafake.NewTestScheme()
		if err := metav1.AddMetaToScheme(scheme); err != nil {
			t.Fatal(err)
		}
		rt := make([]runtime.Object, 0, len(objs))
		for _, o := range objs {
			rt = append(rt, o)
		}
		client := metadatafake.NewSimpleMetadataClient(scheme, rt...)
		disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: served}}
		reg := prometheus.NewRegistry()
		c, err := New(client, disc, Options{Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { c.Run(ctx, 2); close(done) }()
		e := &testEnv{t: t, client: client, c: c}
		e.settle()
		check(e)
		cancel()
		<-done
	})
}

// settle lets retries with backoff run, then waits for quiet.
func (e *testEnv) settle() {
	time.Sleep(5 * time.Second)
	synctest.Wait()
}

func (e *testEnv) get(gvr schema.GroupVersionResource, ns, name string) (*metav1.PartialObjectMetadata, bool) {
	e.t.Helper()
	o, err := e.client.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		e.t.Fatalf("get %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return o, true
}

func (e *testEnv) wantGone(gvr schema.GroupVersionResource, ns, name string) {
	e.t.Helper()
	if _, ok := e.get(gvr, ns, name); ok {
		e.t.Errorf("%s %s/%s: still there, want deleted", gvr.Resource, ns, name)
	}
}

func (e *testEnv) wantKept(gvr schema.GroupVersionResource, ns, name string) *metav1.PartialObjectMetadata {
	e.t.Helper()
	o, ok := e.get(gvr, ns, name)
	if !ok {
		e.t.Fatalf("%s %s/%s: deleted, want kept", gvr.Resource, ns, name)
	}
	return o
}

// deletes returns the delete actions on name, in order.
func (e *testEnv) deletes(name string) []clienttesting.DeleteActionImpl {
	var out []clienttesting.DeleteActionImpl
	for _, a := range e.client.Actions() {
		if d, ok := a.(clienttesting.DeleteActionImpl); ok && d.Name == name {
			out = append(out, d)
		}
	}
	return out
}

func ownerUIDs(o *metav1.PartialObjectMetadata) []types.UID {
	var out []types.UID
	for _, r := range o.OwnerReferences {
		out = append(out, r.UID)
	}
	return out
}

func TestCollectorDeletesDependentOfAbsentOwner(t *testing.T) {
	gone := pom("ConfigMap", "ns", "gone", "u-gone")
	dep := pom("Secret", "ns", "dep", "u-dep", ownedBy(gone, false))
	run(t, []*metav1.PartialObjectMetadata{dep}, func(e *testEnv) {
		e.wantGone(secrets, "ns", "dep")
		if got := testutil.ToFloat64(e.c.metrics.deletions); got != 1 {
			e.t.Errorf("deletions_total: got %v, want 1", got)
		}
		if got := testutil.ToFloat64(e.c.metrics.queueDepth); got != 0 {
			e.t.Errorf("queue_depth: got %v, want 0 once settled", got)
		}
		ds := e.deletes("dep")
		if len(ds) != 1 {
			e.t.Fatalf("deletes of dep: got %d, want 1", len(ds))
		}
		opts := ds[0].DeleteOptions
		if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationBackground {
			e.t.Errorf("propagationPolicy: got %v, want Background", opts.PropagationPolicy)
		}
		if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "u-dep" {
			e.t.Errorf("preconditions: got %+v, want UID u-dep", opts.Preconditions)
		}
	})
}

func TestCollectorKeepsDependentOfLiveOwnerUntilItGoes(t *testing.T) {
	owner := pom("ConfigMap", "ns", "owner", "u-owner")
	dep := pom("Secret", "ns", "dep", "u-dep", ownedBy(owner, false))
	run(t, []*metav1.PartialObjectMetadata{owner, dep}, func(e *testEnv) {
		for _, a := range e.client.Actions() {
			if a.GetVerb() == "get" {
				e.t.Errorf("got a live %s of %s, want none while the owner is observed", a.GetVerb(), a.GetResource().Resource)
			}
		}
		e.wantKept(secrets, "ns", "dep")
		if err := e.client.Tracker().Delete(configMaps, "ns", "owner"); err != nil {
			e.t.Fatal(err)
		}
		e.settle()
		e.wantGone(secrets, "ns", "dep")
	})
}

func TestCollectorOwnerWithSameNameOtherUIDIsAbsent(t *testing.T) {
	owner := pom("ConfigMap", "ns", "owner", "u-new")
	stale := ownedBy(owner, false)
	stale.UID = "u-old"
	dep := pom("Secret", "ns", "dep", "u-dep", stale)
	run(t, []*metav1.PartialObjectMetadata{owner, dep}, func(e *testEnv) {
		e.wantGone(secrets, "ns", "dep")
		e.wantKept(configMaps, "ns", "owner")
	})
}

func TestCollectorStripsDanglingReference(t *testing.T) {
	owner := pom("ConfigMap", "ns", "owner", "u-owner")
	gone := pom("ConfigMap", "ns", "gone", "u-gone")
	dep := pom("Secret", "ns", "dep", "u-dep", ownedBy(owner, false), ownedBy(gone, false))
	run(t, []*metav1.PartialObjectMetadata{owner, dep}, func(e *testEnv) {
		got := e.wantKept(secrets, "ns", "dep")
		if !slices.Equal(ownerUIDs(got), []types.UID{"u-owner"}) {
			e.t.Errorf("owners of dep: got %v, want [u-owner]", ownerUIDs(got))
		}
	})
}

func TestCollectorNamespaceRules(t *testing.T) {
	elsewhere := pom("ConfigMap", "other", "owner", "u-owner")
	node := pom("Node", "", "node", "u-node")
	crossNS := pom("Secret", "ns", "cross", "u-cross", ownedBy(elsewhere, false))
	byNode := pom("Secret", "ns", "by-node", "u-by-node", ownedBy(node, false))
	clusterByNS := pom("Node", "", "cluster-dep", "u-cluster-dep", ownedBy(elsewhere, false))
	objs := []*metav1.PartialObjectMetadata{elsewhere, node, crossNS, byNode, clusterByNS}
	run(t, objs, func(e *testEnv) {
		e.wantGone(secrets, "ns", "cross")
		e.wantKept(secrets, "ns", "by-node")
		e.wantGone(nodes, "", "cluster-dep")
		e.wantKept(configMaps, "other", "owner")
	})
}

func TestCollectorUnknownOwnerKindIsNotAbsence(t *testing.T) {
	dep := pom("Secret", "ns", "dep", "u-dep", metav1.OwnerReference{
		APIVersion: "example.com/v1", Kind: "Widget", Name: "w", UID: "u-w",
	})
	run(t, []*metav1.PartialObjectMetadata{dep}, func(e *testEnv) {
		e.settle()
		e.wantKept(secrets, "ns", "dep")
	})
}

func TestCollectorForegroundDeletion(t *testing.T) {
	owner := deleting(pom("ConfigMap", "ns", "owner", "u-owner"), finalizerForeground, "example.com/keep")
	blocking := pom("Secret", "ns", "blocking", "u-blocking", ownedBy(owner, true))
	other := pom("Secret", "ns", "other", "u-other", ownedBy(owner, false))
	run(t, []*metav1.PartialObjectMetadata{owner, blocking, other}, func(e *testEnv) {
		e.wantGone(secrets, "ns", "blocking")
		e.wantGone(secrets, "ns", "other")
		policies := map[string]metav1.DeletionPropagation{}
		for _, name := range []string{"blocking", "other"} {
			if ds := e.deletes(name); len(ds) > 0 && ds[0].DeleteOptions.PropagationPolicy != nil {
				policies[name] = *ds[0].DeleteOptions.PropagationPolicy
			}
		}
		if policies["blocking"] != metav1.DeletePropagationForeground || policies["other"] != metav1.DeletePropagationBackground {
			e.t.Errorf("policies: got %v, want blocking Foreground, other Background", policies)
		}
		got := e.wantKept(configMaps, "ns", "owner")
		if !slices.Equal(got.Finalizers, []string{"example.com/keep"}) {
			e.t.Errorf("owner finalizers: got %v, want [example.com/keep]", got.Finalizers)
		}
	})
}

func TestCollectorForegroundWaitsForBlockingDependent(t *testing.T) {
	owner := deleting(pom("ConfigMap", "ns", "owner", "u-owner"), finalizerForeground)
	// The blocking dependent is itself going and held by a finalizer.
	blocking := deleting(pom("Secret", "ns", "blocking", "u-blocking", ownedBy(owner, true)), "example.com/hold")
	run(t, []*metav1.PartialObjectMetadata{owner, blocking}, func(e *testEnv) {
		got := e.wantKept(configMaps, "ns", "owner")
		if !slices.Contains(got.Finalizers, finalizerForeground) {
			e.t.Fatalf("owner finalizers: got %v, want foregroundDeletion kept while a blocking dependent exists", got.Finalizers)
		}
		if err := e.client.Tracker().Delete(secrets, "ns", "blocking"); err != nil {
			e.t.Fatal(err)
		}
		e.settle()
		got = e.wantKept(configMaps, "ns", "owner")
		if len(got.Finalizers) != 0 {
			e.t.Errorf("owner finalizers: got %v, want none", got.Finalizers)
		}
	})
}

func TestCollectorOrphan(t *testing.T) {
	owner := deleting(pom("ConfigMap", "ns", "owner", "u-owner"), finalizerOrphan)
	other := pom("ConfigMap", "ns", "other", "u-other")
	dep1 := pom("Secret", "ns", "dep1", "u-dep1", ownedBy(owner, true))
	dep2 := pom("Secret", "ns", "dep2", "u-dep2", ownedBy(owner, false), ownedBy(other, false))
	run(t, []*metav1.PartialObjectMetadata{owner, other, dep1, dep2}, func(e *testEnv) {
		if got := testutil.ToFloat64(e.c.metrics.orphanings); got != 2 {
			e.t.Errorf("orphanings_total: got %v, want 2", got)
		}
		if got := ownerUIDs(e.wantKept(secrets, "ns", "dep1")); len(got) != 0 {
			e.t.Errorf("owners of dep1: got %v, want none", got)
		}
		if got := ownerUIDs(e.wantKept(secrets, "ns", "dep2")); !slices.Equal(got, []types.UID{"u-other"}) {
			e.t.Errorf("owners of dep2: got %v, want [u-other]", got)
		}
		if got := e.wantKept(configMaps, "ns", "owner"); len(got.Finalizers) != 0 {
			e.t.Errorf("owner finalizers: got %v, want none", got.Finalizers)
		}
	})
}

// TestCollectorMergePatchFallback pins the path for resources without
// strategic merge patch: the dangling reference goes with a JSON merge
// patch that carries the resourceVersion read.
func TestCollectorMergePatchFallback(t *testing.T) {
	owner := pom("ConfigMap", "ns", "owner", "u-owner")
	gone := pom("ConfigMap", "ns", "gone", "u-gone")
	dep := pom("Secret", "ns", "dep", "u-dep", ownedBy(owner, false), ownedBy(gone, false))
	synctest.Test(t, func(t *testing.T) {
		scheme := metadatafake.NewTestScheme()
		_ = metav1.AddMetaToScheme(scheme)
		client := metadatafake.NewSimpleMetadataClient(scheme, owner, dep)
		var mergePatch map[string]map[string]any
		client.PrependReactor("patch", "secrets", func(a clienttesting.Action) (bool, runtime.Object, error) {
			p := a.(clienttesting.PatchActionImpl)
			if p.PatchType == types.StrategicMergePatchType {
				return true, nil, apierrors.NewGenericServerResponse(415, "patch", secrets.GroupResource(), "dep", "no strategic merge", 0, false)
			}
			_ = json.Unmarshal(p.Patch, &mergePatch)
			return false, nil, nil
		})
		disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: served}}
		c, _ := New(client, disc, Options{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { c.Run(ctx, 1); close(done) }()
		e := &testEnv{t: t, client: client}
		e.settle()
		if got := ownerUIDs(e.wantKept(secrets, "ns", "dep")); !slices.Equal(got, []types.UID{"u-owner"}) {
			t.Errorf("owners of dep: got %v, want [u-owner]", got)
		}
		if mergePatch["metadata"]["resourceVersion"] == nil {
			t.Errorf("merge patch %v: want a resourceVersion precondition", mergePatch)
		}
		cancel()
		<-done
	})
}

func TestCollectorWatchesResourcesThatAppear(t *testing.T) {
	gone := pom("ConfigMap", "ns", "gone", "u-gone")
	dep := pom("Secret", "ns", "dep", "u-dep", ownedBy(gone, false))
	synctest.Test(t, func(t *testing.T) {
		scheme := metadatafake.NewTestScheme()
		_ = metav1.AddMetaToScheme(scheme)
		client := metadatafake.NewSimpleMetadataClient(scheme, dep)
		onlyConfigMaps := *served[0]
		onlyConfigMaps.APIResources = onlyConfigMaps.APIResources[:1]
		disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{&onlyConfigMaps}}}
		c, _ := New(client, disc, Options{RediscoveryPeriod: time.Minute})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { c.Run(ctx, 1); close(done) }()
		e := &testEnv{t: t, client: client}
		e.settle()
		e.wantKept(secrets, "ns", "dep") // secrets are not served yet
		// The fake reads Resources after taking this lock.
		disc.Lock()
		disc.Resources = served
		disc.Unlock()
		time.Sleep(time.Minute)
		e.settle()
		e.wantGone(secrets, "ns", "dep")
		cancel()
		<-done
	})
}

// TestCollectorRegistersMetrics checks the metric names, and that they are
// registered only while the collector runs, so that one built again after
// a new leader election registers them without a clash.
func TestCollectorRegistersMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	for term := range 2 {
		synctest.Test(t, func(t *testing.T) {
			disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
			c, err := New(metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), disc, Options{Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { c.Run(ctx, 1); close(done) }()
			synctest.Wait()
			want := []string{"garbage_collector_deletions_total", "garbage_collector_orphanings_total", "garbage_collector_queue_depth"}
			if got := metricNames(t, reg); !slices.Equal(got, want) {
				t.Errorf("term %d: got metrics %v while running, want %v", term, got, want)
			}
			cancel()
			<-done
			if got := metricNames(t, reg); len(got) != 0 {
				t.Errorf("term %d: got metrics %v after Run returned, want none", term, got)
			}
		})
	}
}

func metricNames(t *testing.T, g prometheus.Gatherer) []string {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	return names
}
