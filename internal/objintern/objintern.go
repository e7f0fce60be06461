// Package objintern makes decoded Kubernetes objects share the metadata
// that repeats between them.
//
// A component that keeps many decoded objects keeps a copy of every string
// and byte slice in each. Much of an object's metadata is the same in
// thousands of objects: the namespace, label keys and values, owner
// references, and above all the managed fields, whose manager, operation,
// API version and field set (FieldsV1) are identical in every object one
// client writes the same way. A Table hands out the copy of each value it
// saw first, so that the objects share it and the other copies are garbage
// at once. The API server's storage decodes through a Codec, so that the
// watch cache's objects share, with their equal label and annotation maps
// and managed fields; the garbage collector shares what its graph keeps.
//
// Sharing is safe because such objects are read-only: the watch cache hands
// its objects to every reader and to updates as the existing object, so
// nothing may change them in place, and a copy of the object (DeepCopy)
// copies what is shared. Strings cannot change at all; the shared FieldsV1
// bytes have no spare capacity, so an append copies them.
//
// This package owns the interning and nothing else: it does not decide what
// is stored or how it is encoded.
package objintern

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Bounds of a Table. A full table is emptied and fills again with what
// repeats now; objects keep the copies they share. What the table itself
// keeps alive is at most its entries times their longest (about 4 MiB),
// and in practice the few values that repeat.
const (
	maxStrings    = 8192
	maxStringLen  = 128
	maxRaw        = 512
	maxRawLen     = 4096
	maxMaps       = 1024
	maxMapLen     = 512 // the sum of the keys' and values' lengths
	maxMapKeys    = 16
	maxManaged    = 1024
	maxManagedLen = 4096 // the encoded length of the entries
)

// Table holds the first copy seen of each value. Its zero value is ready
// to use and it is safe for concurrent use.
type Table struct {
	mu      sync.Mutex
	strings map[string]string
	// raw is keyed by a hash of the bytes; a collision keeps the newer
	// value, so the bytes are compared on every hit.
	raw  map[uint64][]byte
	seed maphash.Seed
	// maps is keyed by the sorted keys and values, each after its length,
	// so that no two different maps have the same key.
	maps   map[string]map[string]string
	mapKey []byte
	// managed is keyed as maps are, by every field of the entries.
	managed    map[string][]metav1.ManagedFieldsEntry
	managedKey []byte
}

// String returns s, or an equal string seen before.
func (t *Table) String(s string) string {
	if s == "" || len(s) > maxStringLen {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stringLocked(s)
}

func (t *Table) stringLocked(s string) string {
	if s == "" || len(s) > maxStringLen {
		return s
	}
	if c, ok := t.strings[s]; ok {
		return c
	}
	if t.strings == nil || len(t.strings) >= maxStrings {
		t.strings = make(map[string]string)
	}
	t.strings[s] = s
	return s
}

// Bytes returns b, or equal bytes seen before, with no spare capacity.
func (t *Table) Bytes(b []byte) []byte {
	if len(b) == 0 || len(b) > maxRawLen {
		return b
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytesLocked(b)
}

func (t *Table) bytesLocked(b []byte) []byte {
	if len(b) == 0 || len(b) > maxRawLen {
		return b
	}
	b = b[:len(b):len(b)]
	if t.raw == nil {
		t.seed = maphash.MakeSeed()
	}
	h := maphash.Bytes(t.seed, b)
	if c, ok := t.raw[h]; ok && bytes.Equal(c, b) {
		return c
	}
	if t.raw == nil || len(t.raw) >= maxRaw {
		t.raw = make(map[uint64][]byte)
	}
	t.raw[h] = b
	return b
}

// Map returns m, or a map equal to m seen before. Unlike strings and
// bytes, maps can be changed in place, so only objects that are read-only
// for as long as they exist, as the watch cache's are, may share them.
func (t *Table) Map(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > maxMapKeys {
		return m
	}
	var buf [maxMapKeys]string
	keys := buf[:0]
	n := 0
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v)
	}
	if n > maxMapLen {
		return m
	}
	slices.Sort(keys)
	t.mu.Lock()
	defer t.mu.Unlock()
	key := t.mapKey[:0]
	for _, k := range keys {
		v := m[k]
		key = append(binary.AppendUvarint(key, uint64(len(k))), k...)
		key = append(binary.AppendUvarint(key, uint64(len(v))), v...)
	}
	t.mapKey = key
	if c, ok := t.maps[string(key)]; ok {
		return c
	}
	if t.maps == nil || len(t.maps) >= maxMaps {
		t.maps = make(map[string]map[string]string)
	}
	t.maps[string(key)] = m
	return m
}

// ManagedFields returns mf, or managed fields equal to mf seen before,
// times included. Objects one client writes the same way within a second
// (a burst of creates, the Pods of one ReplicaSet) have equal managed
// fields, and the slice with its times and FieldsV1 is a few hundred bytes
// per object. Like maps, the entries can be changed in place, so only
// read-only objects may share them.
func (t *Table) ManagedFields(mf []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	if len(mf) == 0 {
		return mf
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	key := t.managedKey[:0]
	for i := range mf {
		key = appendManagedKey(key, &mf[i])
	}
	t.managedKey = key
	if len(key) > maxManagedLen {
		return mf
	}
	if c, ok := t.managed[string(key)]; ok {
		return c
	}
	if t.managed == nil || len(t.managed) >= maxManaged {
		t.managed = make(map[string][]metav1.ManagedFieldsEntry)
	}
	t.managed[string(key)] = mf[:len(mf):len(mf)]
	return mf
}

// appendManagedKey appends every field of e, each after its length (the
// time as its Unix nanoseconds after a presence byte), so that no two
// different entries give the same bytes. Decoded times are whole seconds,
// all their encoding keeps.
func appendManagedKey(key []byte, e *metav1.ManagedFieldsEntry) []byte {
	for _, s := range []string{e.Manager, string(e.Operation), e.APIVersion, e.FieldsType, e.Subresource} {
		key = append(binary.AppendUvarint(key, uint64(len(s))), s...)
	}
	if e.Time == nil {
		key = append(key, 0)
	} else {
		key = binary.AppendVarint(append(key, 1), e.Time.UnixNano())
	}
	if e.FieldsV1 == nil {
		return append(key, 0)
	}
	key = binary.AppendUvarint(append(key, 1), uint64(len(e.FieldsV1.Raw)))
	return append(key, e.FieldsV1.Raw...)
}

// Meta replaces the repeating parts of m with the copies the table holds:
// the namespace, label keys and values, annotation keys, finalizers, owner
// references but their controller flags, and the managed fields but their
// times. Names, UIDs and resource versions are one per object, and
// annotation values are often large and unique, so they stay.
func (t *Table) Meta(m *metav1.ObjectMeta) {
	// One lock for the object rather than one for each of its twenty or so
	// values: decodes on many goroutines at once take turns less often.
	t.mu.Lock()
	defer t.mu.Unlock()
	m.Namespace = t.stringLocked(m.Namespace)
	m.GenerateName = t.stringLocked(m.GenerateName)
	for k, v := range m.Labels {
		// Assigning to an existing key stores the key given too.
		m.Labels[t.stringLocked(k)] = t.stringLocked(v)
	}
	for k, v := range m.Annotations {
		m.Annotations[t.stringLocked(k)] = v
	}
	for i := range m.Finalizers {
		m.Finalizers[i] = t.stringLocked(m.Finalizers[i])
	}
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind = t.stringLocked(r.APIVersion), t.stringLocked(r.Kind)
		r.Name, r.UID = t.stringLocked(r.Name), types.UID(t.stringLocked(string(r.UID)))
	}
	for i := range m.ManagedFields {
		f := &m.ManagedFields[i]
		f.Manager = t.stringLocked(f.Manager)
		f.Operation = metav1.ManagedFieldsOperationType(t.stringLocked(string(f.Operation)))
		f.APIVersion, f.FieldsType = t.stringLocked(f.APIVersion), t.stringLocked(f.FieldsType)
		f.Subresource = t.stringLocked(f.Subresource)
		if f.FieldsV1 != nil {
			f.FieldsV1.Raw = t.bytesLocked(f.FieldsV1.Raw)
		}
	}
}

// Object interns the metadata of obj, if it has the standard one.
func (t *Table) Object(obj runtime.Object) {
	a, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return
	}
	if m, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok && m != nil {
		t.Meta(m)
	}
}

// ShareMaps makes obj's labels, annotations and managed fields, if it has
// the standard metadata, the equal ones seen before. Only for read-only
// objects (see Map).
func (t *Table) ShareMaps(obj runtime.Object) {
	a, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return
	}
	if m, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok && m != nil {
		m.Labels, m.Annotations = t.Map(m.Labels), t.Map(m.Annotations)
		m.ManagedFields = t.ManagedFields(m.ManagedFields)
	}
}

// Codec is a runtime.Codec whose decoded objects share their repeating
// metadata through Table.
type Codec struct {
	runtime.Codec
	Table *Table
}

// Decode decodes as the wrapped codec does and interns the result.
func (c Codec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := c.Codec.Decode(data, defaults, into)
	if err == nil {
		c.Table.Object(obj)
	}
	return obj, gvk, err
}
