package objintern

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

func configMap(name string) *corev1.ConfigMap {
	yes := true
	now := metav1.Unix(1700000000, 0)
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "team-a", UID: k8stypes.UID("uid-" + name),
			Labels:          map[string]string{"app.kubernetes.io/name": "web"},
			Annotations:     map[string]string{"note": "value of " + name},
			Finalizers:      []string{"example.com/keep"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "owner-uid", Controller: &yes}},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:key":{}}}`)},
			}},
		},
		Data: map[string]string{"key": strings.Repeat("v", 64)},
	}
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestDecodedObjectsShareMetadata pins what the watch cache's objects
// share: two ConfigMaps a client wrote the same way, decoded from their
// protobuf, share one copy of each repeating value, and each still equals
// what was encoded.
func TestDecodedObjectsShareMetadata(t *testing.T) {
	codec := Codec{Codec: protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), Table: &Table{}}
	var got [2]*corev1.ConfigMap
	for i := range got {
		want := configMap(fmt.Sprintf("cm-%d", i))
		data, err := runtime.Encode(codec, want)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := runtime.Decode(codec, data)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = obj.(*corev1.ConfigMap)
		if !apiequality.Semantic.DeepEqual(got[i], want) {
			t.Fatalf("decoded %s: got %#v, want %#v", want.Name, got[i], want)
		}
	}
	a, b := got[0].ObjectMeta, got[1].ObjectMeta
	shared := []struct {
		name string
		a, b string
	}{
		{"namespace", a.Namespace, b.Namespace},
		{"label value", a.Labels["app.kubernetes.io/name"], b.Labels["app.kubernetes.io/name"]},
		{"finalizer", a.Finalizers[0], b.Finalizers[0]},
		{"owner kind", a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		{"owner UID", string(a.OwnerReferences[0].UID), string(b.OwnerReferences[0].UID)},
		{"manager", a.ManagedFields[0].Manager, b.ManagedFields[0].Manager},
		{"operation", string(a.ManagedFields[0].Operation), string(b.ManagedFields[0].Operation)},
		{"fields type", a.ManagedFields[0].FieldsType, b.ManagedFields[0].FieldsType},
	}
	for _, s := range shared {
		if !sameString(s.a, s.b) {
			t.Errorf("%s %q: got two copies, want one", s.name, s.a)
		}
	}
	ra, rb := a.ManagedFields[0].FieldsV1.Raw, b.ManagedFields[0].FieldsV1.Raw
	if &ra[0] != &rb[0] {
		t.Errorf("FieldsV1 %s: got two copies, want one", ra)
	}
	if cap(ra) != len(ra) {
		t.Errorf("shared FieldsV1: got capacity %d, want %d so that an append copies", cap(ra), len(ra))
	}
	if sameString(a.Annotations["note"], b.Annotations["note"]) || sameString(a.Name, b.Name) {
		t.Errorf("values that differ must stay apart")
	}
}

// TestTableBounds checks that a full table starts over rather than grow,
// and that values too long to be worth a lookup are left alone.
func TestTableBounds(t *testing.T) {
	var tab Table
	for i := range maxStrings + 10 {
		tab.String(fmt.Sprintf("value-%d", i))
	}
	if n := len(tab.strings); n > maxStrings {
		t.Errorf("strings held: got %d, want at most %d", n, maxStrings)
	}
	long := strings.Repeat("x", maxStringLen+1)
	if got := tab.String(strings.Clone(long)); sameString(got, tab.String(strings.Clone(long))) {
		t.Errorf("a string over %d bytes was interned", maxStringLen)
	}
	for i := range maxRaw + 10 {
		tab.Bytes(fmt.Appendf(nil, "raw-%d", i))
	}
	if n := len(tab.raw); n > maxRaw {
		t.Errorf("byte values held: got %d, want at most %d", n, maxRaw)
	}
	x, y := tab.Bytes([]byte("same")), tab.Bytes([]byte("same"))
	if &x[0] != &y[0] {
		t.Errorf("equal bytes after a refill: got two copies, want one")
	}
}

// TestMapSharesEqualMaps checks that equal label sets come back as one
// map, whatever order they were built in, and that different, large or
// empty ones are left alone.
func TestMapSharesEqualMaps(t *testing.T) {
	var tab Table
	first := tab.Map(map[string]string{"app": "web", "tier": "front"})
	tests := []struct {
		name  string
		in    map[string]string
		share bool
	}{
		{"equal", map[string]string{"tier": "front", "app": "web"}, true},
		{"other value", map[string]string{"app": "web", "tier": "back"}, false},
		{"subset", map[string]string{"app": "web"}, false},
		{"same bytes split differently", map[string]string{"app": "web\x00tier\x00front"}, false},
		{"same bytes split differently again", map[string]string{"app": "webtier", "front": ""}, false},
		{"too long", map[string]string{"app": strings.Repeat("w", maxMapLen)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tab.Map(tc.in)
			if shared := reflect.ValueOf(got).UnsafePointer() == reflect.ValueOf(first).UnsafePointer(); shared != tc.share {
				t.Errorf("shared with the first map: got %v, want %v", shared, tc.share)
			}
			if !reflect.DeepEqual(got, tc.in) {
				t.Errorf("got %v, want %v", got, tc.in)
			}
		})
	}
	if got := tab.Map(nil); got != nil {
		t.Errorf("nil map: got %v, want nil", got)
	}
}

// TestManagedFieldsSharesEqualEntries checks that managed fields equal in
// every field, time included, come back as one slice, and that entries
// differing in any field, or too long, are left alone.
func TestManagedFieldsSharesEqualEntries(t *testing.T) {
	entry := func(manager string, sec int64, raw string) metav1.ManagedFieldsEntry {
		at := metav1.Unix(sec, 0)
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}}
	}
	var tab Table
	first := tab.ManagedFields([]metav1.ManagedFieldsEntry{entry("client", 100, `{"f:data":{}}`)})
	tests := []struct {
		name  string
		in    []metav1.ManagedFieldsEntry
		share bool
	}{
		{"equal", []metav1.ManagedFieldsEntry{entry("client", 100, `{"f:data":{}}`)}, true},
		{"another second", []metav1.ManagedFieldsEntry{entry("client", 101, `{"f:data":{}}`)}, false},
		{"another manager", []metav1.ManagedFieldsEntry{entry("kubectl", 100, `{"f:data":{}}`)}, false},
		{"other fields", []metav1.ManagedFieldsEntry{entry("client", 100, `{"f:spec":{}}`)}, false},
		{"one more entry", []metav1.ManagedFieldsEntry{entry("client", 100, `{"f:data":{}}`), entry("kubectl", 100, `{}`)}, false},
		{"no time", []metav1.ManagedFieldsEntry{{Manager: "client", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}}}, false},
		{"too long", []metav1.ManagedFieldsEntry{entry("client", 100, strings.Repeat("x", maxManagedLen))}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tab.ManagedFields(tc.in)
			if shared := &got[0] == &first[0]; shared != tc.share {
				t.Errorf("shared with the first entries: got %v, want %v", shared, tc.share)
			}
			if !apiequality.Semantic.DeepEqual(got, tc.in) {
				t.Errorf("got %v, want %v", got, tc.in)
			}
		})
	}
	if got := tab.ManagedFields(nil); got != nil {
		t.Errorf("no managed fields: got %v, want nil", got)
	}
}
