package objintern_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"portal.dev/portal/apiserver/scheme"
	"portal.dev/portal/internal/objintern"
)

// BenchmarkDecodeConfigMap is the cost of objintern on the API server's
// storage decode of a ConfigMap, as its watch cache and lists decode from
// etcd: the storage codec alone (the anchor) and wrapped in objintern.Codec,
// on one goroutine and on GOMAXPROCS at once.
func BenchmarkDecodeConfigMap(b *testing.B) {
	codec, _, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  runtime.ContentTypeProtobuf,
		StorageSerializer: scheme.Codecs,
		StorageVersion:    corev1.SchemeGroupVersion,
		MemoryVersion:     schema.GroupVersion{Version: runtime.APIVersionInternal},
		Config:            storagebackend.Config{},
	})
	if err != nil {
		b.Fatal(err)
	}
	data, err := runtime.Encode(codec, benchConfigMap("cm-1"))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		codec runtime.Codec
	}{
		{"storage codec", codec},
		{"objintern", objintern.Codec{Codec: codec, Table: &objintern.Table{}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := runtime.Decode(c.codec, data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+" parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := runtime.Decode(c.codec, data); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkInternConfigMap is objintern's share of the decode alone:
// Table.Object on a decoded ConfigMap whose values the table holds, as in
// the watch cache's steady state, on one goroutine and on GOMAXPROCS at
// once, each with an object of its own.
func BenchmarkInternConfigMap(b *testing.B) {
	var t objintern.Table
	b.Run("serial", func(b *testing.B) {
		obj := benchConfigMap("cm-1")
		b.ReportAllocs()
		for b.Loop() {
			t.Object(obj)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			obj := benchConfigMap("cm-1")
			for pb.Next() {
				t.Object(obj)
			}
		})
	})
}

// benchConfigMap is a ConfigMap as a client-side apply writes it, owned by
// a Deployment: metadata of the kinds objintern shares.
func benchConfigMap(name string) *corev1.ConfigMap {
	yes := true
	now := metav1.Unix(1700000000, 0)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "team-a", UID: k8stypes.UID("uid-" + name), ResourceVersion: "12345",
			Labels:          map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/part-of": "shop", "tier": "frontend"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q}}`, name)},
			Finalizers:      []string{"example.com/keep"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "owner-uid", Controller: &yes}},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:key":{}},"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{},"f:tier":{}}}}`)},
			}},
		},
		Data: map[string]string{"key": strings.Repeat("v", 64)},
	}
}
