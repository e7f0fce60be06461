package registry

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"portal.dev/portal/apiserver/embeddedetcd"
	"portal.dev/portal/apiserver/scheme"
)

// etcdOptions stores resources in a real embedded etcd, as the server
// does, without its watch cache.
type etcdOptions struct {
	base storagebackend.Config
}

func (o etcdOptions) GetRESTOptions(gr schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	cfg := o.base
	codec, versioner, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  runtime.ContentTypeJSON,
		StorageSerializer: scheme.Codecs,
		StorageVersion:    corev1.SchemeGroupVersion,
		MemoryVersion:     schema.GroupVersion{Version: runtime.APIVersionInternal},
		Config:            cfg,
	})
	if err != nil {
		return generic.RESTOptions{}, err
	}
	cfg.Codec, cfg.EncodeVersioner = codec, versioner
	return generic.RESTOptions{
		StorageConfig:  cfg.ForResource(gr),
		Decorator:      generic.UndecoratedStorage,
		ResourcePrefix: gr.Resource,
	}, nil
}

// TestTerminatingNamespaceStatusWriteKeepsIt pins the store wiring of
// shouldDeleteNamespaceDuringUpdate: a status write to a Terminating
// namespace whose content is still being deleted (its "kubernetes"
// finalizer left) deleted the namespace, since the generic store's rule
// looks at metadata.finalizers only.
func TestTerminatingNamespaceStatusWriteKeepsIt(t *testing.T) {
	etcd, err := embeddedetcd.Start(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	backend := storagebackend.NewDefaultConfig("/registry", nil)
	backend.Transport.ServerList = []string{etcd.Endpoint}
	backend.Transport.CertFile, backend.Transport.KeyFile = etcd.CertFile, etcd.KeyFile
	backend.Transport.TrustedCAFile = etcd.CAFile
	var kind Kind
	for _, k := range Kinds(Config{}) {
		if k.Resource == "namespaces" {
			kind = k
		}
	}
	main, status, err := NewStore(kind, etcdOptions{base: *backend})
	if err != nil {
		t.Fatal(err)
	}
	defer main.Destroy()
	ctx := genericapirequest.WithNamespace(genericapirequest.WithRequestInfo(context.Background(), &genericapirequest.RequestInfo{}), metav1.NamespaceNone)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
	if _, err := main.Create(ctx, ns, nil, &metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nsREST := &NamespaceREST{REST: main}
	if _, _, err := nsREST.Delete(ctx, "doomed", nil, &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := main.Get(ctx, "doomed", &metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after delete: %v", err)
	}
	terminating := got.(*corev1.Namespace).DeepCopy()
	if terminating.DeletionTimestamp == nil || len(terminating.Spec.Finalizers) == 0 {
		t.Fatalf("after delete: got %+v, want Terminating with the kubernetes finalizer", terminating)
	}
	terminating.Status.Conditions = []corev1.NamespaceCondition{{Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionTrue}}
	if _, _, err := status.Update(ctx, "doomed", rest.DefaultUpdatedObjectInfo(terminating), nil, nil, false, &metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status update: %v", err)
	}
	if _, err := main.Get(ctx, "doomed", &metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Fatal("the status write deleted a Terminating namespace whose content is still being deleted")
	} else if err != nil {
		t.Fatal(err)
	}
}
