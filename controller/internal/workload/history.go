package workload

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
)

// RevisionHashLabel labels a ControllerRevision with its hash, as
// upstream, and the Pods of a StatefulSet or DaemonSet with the revision
// they were made from.
const RevisionHashLabel = appsv1.ControllerRevisionHashLabelKey

// deepHash writes a stable text form of obj (map keys sorted, no pointer
// addresses) to h, as upstream's DeepHashObject, so equal objects hash
// alike across runs and across Portal and kube-controller-manager.
func deepHash(h hash.Hash, obj any) {
	h.Reset()
	fmt.Fprintf(h, "%v", dump.ForHash(obj))
}

// TemplateHash is the hash of a Pod template with a collision count, as
// upstream's ComputeHash: fnv-32a of the template, then, when the count is
// set, of eight bytes holding it little-endian, safe-encoded. It names a
// Deployment's ReplicaSets and is their pod-template-hash label.
func TemplateHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	deepHash(h, *template)
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// RevisionHash is the hash of a ControllerRevision's data with a
// collision count, as upstream's HashControllerRevision: fnv-32 of the raw
// data (or of the object), then of the count in decimal, safe-encoded.
func RevisionHash(rev *appsv1.ControllerRevision, collisionCount *int32) string {
	h := fnv.New32()
	if len(rev.Data.Raw) > 0 {
		h.Write(rev.Data.Raw)
	}
	if rev.Data.Object != nil {
		deepHash(h, rev.Data.Object)
	}
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// RevisionName names a revision of owner "<owner>-<hash>", shortening
// the owner's name so the result fits in a DNS subdomain.
func RevisionName(owner, hash string) string {
	if len(owner) > 223 {
		owner = owner[:223]
	}
	return owner + "-" + hash
}

// NewRevision builds revision number revision of owner (of kind gvk) from
// data, labelled with labels, controlled by owner, not yet named: Create
// names it.
func NewRevision(owner metav1.Object, gvk schema.GroupVersionKind, labels map[string]string, data runtime.RawExtension, revision int64) *appsv1.ControllerRevision {
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       owner.GetNamespace(),
			Labels:          copyMap(labels),
			OwnerReferences: []metav1.OwnerReference{ControllerRef(owner, gvk)},
		},
		Data:     data,
		Revision: revision,
	}
}

// CreateRevision creates rev named RevisionName(owner, hash) with the
// hash label. When another revision already has that name: if it holds
// the same data, it is returned; otherwise the hashes collided, so
// collisionCount is raised and the next name tried, as upstream. The
// owner's status must then record the new collisionCount.
func CreateRevision(ctx context.Context, client kubernetes.Interface, owner metav1.Object, rev *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	if collisionCount == nil {
		return nil, fmt.Errorf("create revision of %s/%s: nil collision count", owner.GetNamespace(), owner.GetName())
	}
	revs := client.AppsV1().ControllerRevisions(owner.GetNamespace())
	for {
		r := rev.DeepCopy()
		hash := RevisionHash(r, collisionCount)
		r.Name = RevisionName(owner.GetName(), hash)
		if r.Labels == nil {
			r.Labels = map[string]string{}
		}
		r.Labels[RevisionHashLabel] = hash
		created, err := revs.Create(ctx, r, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		existing, err := revs.Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if metav1.IsControlledBy(existing, owner) && EqualRevision(existing, r) {
			return existing, nil
		}
		*collisionCount++
	}
}

// EqualRevision reports whether two revisions hold the same data.
func EqualRevision(a, b *appsv1.ControllerRevision) bool {
	if a == nil || b == nil {
		return a == b
	}
	return bytes.Equal(a.Data.Raw, b.Data.Raw) && equality.Semantic.DeepEqual(a.Data.Object, b.Data.Object)
}

// SortRevisions sorts revisions oldest first: by revision number, then
// creation time, then name, as upstream.
func SortRevisions(revisions []*appsv1.ControllerRevision) {
	sort.SliceStable(revisions, func(i, j int) bool {
		a, b := revisions[i], revisions[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// NextRevision returns the number the next revision takes: one more than
// the highest in revisions, or 1 when there is none.
func NextRevision(revisions []*appsv1.ControllerRevision) int64 {
	var n int64
	for _, r := range revisions {
		n = max(n, r.Revision)
	}
	return n + 1
}

// TruncateHistory deletes the oldest revisions beyond limit, never one
// whose name is in live (the current and update revisions, those Pods
// still run), as upstream's StatefulSet and DaemonSet controllers keep
// spec.revisionHistoryLimit.
func TruncateHistory(ctx context.Context, client kubernetes.Interface, revisions []*appsv1.ControllerRevision, live map[string]bool, limit int) error {
	var old []*appsv1.ControllerRevision
	for _, r := range revisions {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	if len(old) <= limit {
		return nil
	}
	SortRevisions(old)
	for _, r := range old[:len(old)-limit] {
		err := client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &r.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete revision %s/%s: %w", r.Namespace, r.Name, err)
		}
	}
	return nil
}
