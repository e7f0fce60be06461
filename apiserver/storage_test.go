package apiserver

import (
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The watch cache keeps one decoded object per stored object; objects
// decoded through the storage codec share what repeats between them (see
// objintern), here the namespace and the managed fields.
func TestStorageCodecSharesRepeatedMetadata(t *testing.T) {
	f := &storageFactory{}
	cfg, err := f.NewConfig(schema.GroupResource{Resource: "configmaps"}, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	var got [2]*corev1.ConfigMap
	for i, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "client", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}}}}}
		data, err := runtime.Encode(cfg.Codec, cm)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := runtime.Decode(cfg.Codec, data)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = obj.(*corev1.ConfigMap)
	}
	a, b := got[0], got[1]
	if a.Namespace != "team-a" || unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) {
		t.Errorf("namespaces %q and %q: want one shared copy of team-a", a.Namespace, b.Namespace)
	}
	ra, rb := a.ManagedFields[0].FieldsV1.Raw, b.ManagedFields[0].FieldsV1.Raw
	if string(ra) != `{"f:data":{}}` || &ra[0] != &rb[0] {
		t.Errorf("managed fields %s and %s: want one shared copy", ra, rb)
	}
}

// Objects entering the watch cache share equal label sets and equal
// managed fields (one client's writes within a second), and their
// attributes for selectors are unchanged.
func TestWatchCacheObjectsShareLabels(t *testing.T) {
	g := &etcdStorage{}
	attrs := g.cacheAttrs(func(obj runtime.Object) (labels.Set, fields.Set, error) {
		m := obj.(*corev1.ConfigMap)
		return m.Labels, fields.Set{"metadata.name": m.Name}, nil
	})
	var got [2]*corev1.ConfigMap
	for i, name := range []string{"a", "b"} {
		at := metav1.Unix(1700000000, 0)
		got[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "client", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}}}}}
		l, f, err := attrs(got[i])
		if err != nil {
			t.Fatal(err)
		}
		if l.Get("app") != "web" || f.Get("metadata.name") != name {
			t.Errorf("attributes of %s: got %v, %v", name, l, f)
		}
	}
	if reflect.ValueOf(got[0].Labels).UnsafePointer() != reflect.ValueOf(got[1].Labels).UnsafePointer() {
		t.Errorf("labels %v and %v: got two maps, want one", got[0].Labels, got[1].Labels)
	}
	if &got[0].ManagedFields[0] != &got[1].ManagedFields[0] {
		t.Errorf("managed fields of %s and %s: got two copies, want one", got[0].Name, got[1].Name)
	}
}
