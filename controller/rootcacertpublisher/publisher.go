// Package rootcacertpublisher is Portal's root-ca-cert-publisher, as
// upstream's in kube-controller-manager: every active namespace holds a
// ConfigMap kube-root-ca.crt whose ca.crt is the CA the API server's
// certificate chains to, so that a pod can verify kubernetes.default
// without a credential. The projected volume ServiceAccount admission adds
// names it. The controller writes only that ConfigMap: it creates it,
// puts its data and annotation back when they differ, and creates it
// again when it is deleted.
package rootcacertpublisher

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"portal.dev/portal/internal/loop"
)

// Upstream's names.
const (
	// ConfigMapName is the ConfigMap every namespace gets.
	ConfigMapName = "kube-root-ca.crt"
	// DataKey holds the PEM bundle.
	DataKey = "ca.crt"
	// DescriptionAnnotation says what the ConfigMap is for.
	DescriptionAnnotation = "kubernetes.io/description"
	description           = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
)

// Publisher keeps kube-root-ca.crt in every active namespace.
type Publisher struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	// own holds the informer of the kube-root-ca.crt ConfigMaps only.
	own        informers.SharedInformerFactory
	rootCA     []byte
	namespaces corelisters.NamespaceLister
	configMaps corelisters.ConfigMapLister
	loop       *loop.Loop[string]
}

// New returns a publisher of rootCA (PEM) that writes through client and
// reads Namespaces from factory's informers. Its keys are namespace names.
//
// It watches only the ConfigMaps named kube-root-ca.crt, with an informer
// of its own: a shared informer of every ConfigMap would keep a copy of all
// of a cluster's ConfigMaps in the controller manager for the sake of one
// per namespace (upstream's publisher does keep them all).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, rootCA []byte) *Publisher {
	own := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ConfigMapName).String()
	}))
	nsInf, cmInf := factory.Core().V1().Namespaces(), own.Core().V1().ConfigMaps()
	p := &Publisher{client: client, factory: factory, own: own, rootCA: rootCA,
		namespaces: nsInf.Lister(), configMaps: cmInf.Lister()}
	p.loop = loop.New(loop.Config[string]{Name: "root_ca_cert_publisher", Sync: p.sync})
	p.loop.WaitFor(nsInf.Informer().HasSynced, cmInf.Informer().HasSynced)
	p.loop.WatchOrLog(nsInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.queueNamespace(obj) },
		UpdateFunc: func(_, obj any) { p.queueNamespace(obj) },
	})
	p.loop.WatchOrLog(cmInf.Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { p.queueConfigMap(obj) },
		DeleteFunc: p.queueConfigMap,
	})
	return p
}

// Run starts the informers that are not running yet, waits for their
// caches and syncs with workers goroutines until ctx ends.
func (p *Publisher) Run(ctx context.Context, workers int) {
	p.factory.Start(ctx.Done())
	p.own.Start(ctx.Done())
	defer p.own.Shutdown()
	p.loop.Run(ctx, workers)
}

func (p *Publisher) queueNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		p.loop.Add(ns.Name)
	}
}

func (p *Publisher) queueConfigMap(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == ConfigMapName {
		p.loop.Add(cm.Namespace)
	}
}

// sync makes namespace's kube-root-ca.crt hold the root CA.
func (p *Publisher) sync(ctx context.Context, namespace string) error {
	ns, err := p.namespaces.Get(namespace)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		return nil
	}
	cms := p.client.CoreV1().ConfigMaps(namespace)
	cm, err := p.configMaps.ConfigMaps(namespace).Get(ConfigMapName)
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Annotations: map[string]string{DescriptionAnnotation: description}},
			Data:       map[string]string{DataKey: string(p.rootCA)},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("create %s in %s: %w", ConfigMapName, namespace, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if bytes.Equal([]byte(cm.Data[DataKey]), p.rootCA) && cm.Annotations[DescriptionAnnotation] == description && len(cm.Data) == 1 {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = map[string]string{DataKey: string(p.rootCA)}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = description
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update %s in %s: %w", ConfigMapName, namespace, err)
	}
	return nil
}
