package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
)

// process does what the observed object with uid needs: let go of its
// dependents (orphan), wait for them (foreground), or, as a dependent, be
// checked against its owners.
func (c *Collector) process(ctx context.Context, uid types.UID) error {
	o, ok := c.graph.get(uid)
	if !ok {
		return nil
	}
	if o.orphaning() {
		if err := c.orphan(ctx, o); err != nil {
			return err
		}
	}
	switch {
	case o.deletingDependents():
		return c.foreground(ctx, o)
	case o.Deleting || len(o.Owners) == 0:
		return nil
	}
	return c.collect(ctx, o)
}

// collect deletes dependent o, or strips references to gone owners from
// it, depending on the live state of o and of its owners.
func (c *Collector) collect(ctx context.Context, o object) error {
	if c.ownersObservedSolid(o) {
		return nil // the common case, settled without a read
	}
	live, err := c.client(o.resource(), o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", describe(o), err)
	}
	if live.UID != o.UID || live.DeletionTimestamp != nil {
		return nil
	}
	o.Owners = live.OwnerReferences
	states := make([]ownerState, len(o.Owners))
	for i, ref := range o.Owners {
		if states[i], err = c.ownerState(ctx, o, ref); err != nil {
			return fmt.Errorf("owner %s %q of %s: %w", ref.Kind, ref.Name, describe(o), err)
		}
	}
	v := judge(o.Owners, states)
	switch {
	case v.Delete:
		return c.deleteDependent(ctx, o, live, v.Policy)
	case len(v.RemoveOwners) > 0:
		klog.V(2).InfoS("Removing references to absent or deleting owners", "object", describe(o), "owners", v.RemoveOwners)
		_, err := c.removeOwnerRefs(ctx, o, v.RemoveOwners)
		return err
	}
	return nil
}

// ownersObservedSolid reports whether every owner of o is observed, may
// own o and is not deleting its dependents: then o stays as it is.
func (c *Collector) ownersObservedSolid(o object) bool {
	for _, r := range o.Owners {
		owner, ok := c.graph.get(r.UID)
		if !ok || !o.mayBeOwnedBy(owner.Namespace) || owner.deletingDependents() {
			return false
		}
	}
	return true
}

// ownerState finds what dependent's reference ref points at: the graph
// answers for observed owners, a live GET for the others.
func (c *Collector) ownerState(ctx context.Context, dependent object, ref metav1.OwnerReference) (ownerState, error) {
	if owner, ok := c.graph.get(ref.UID); ok {
		if !dependent.mayBeOwnedBy(owner.Namespace) {
			return ownerAbsent, nil
		}
		return stateOf(owner.deletingDependents()), nil
	}
	gvr, namespaced, err := c.resolve(ref)
	if err != nil {
		return 0, err
	}
	ns := ""
	if namespaced {
		if dependent.Namespace == "" {
			return ownerAbsent, nil // a namespaced owner cannot own a cluster-scoped object
		}
		ns = dependent.Namespace
	}
	if c.graph.isAbsent(ref.UID, ns) {
		return ownerAbsent, nil
	}
	live, err := c.client(gvr, ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), err == nil && live.UID != ref.UID:
		c.graph.markAbsent(ref.UID, ns)
		return ownerAbsent, nil
	case err != nil:
		return 0, err
	}
	return stateOf(live.DeletionTimestamp != nil && hasFinalizer(live, finalizerForeground)), nil
}

func stateOf(deletingDependents bool) ownerState {
	if deletingDependents {
		return ownerWaiting
	}
	return ownerSolid
}

// resolve maps an owner reference's apiVersion and kind to a resource and
// tells whether it is namespaced. A version no longer served falls back to
// the preferred one: every version names the same objects.
func (c *Collector) resolve(ref metav1.OwnerReference) (schema.GroupVersionResource, bool, error) {
	m := c.mapper.Load()
	if m == nil {
		return schema.GroupVersionResource{}, false, errors.New("no REST mapping discovered yet")
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	mapping, err := (*m).RESTMapping(gk, gv.Version)
	if meta.IsNoMatchError(err) {
		mapping, err = (*m).RESTMapping(gk)
	}
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return mapping.Resource, mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// foreground finishes the foreground deletion of owner: its dependents are
// examined (and so deleted), and once no blocking one is left the
// foregroundDeletion finalizer goes. The owner is queued again whenever a
// dependent goes or stops blocking.
func (c *Collector) foreground(ctx context.Context, owner object) error {
	examine, done := foregroundPlan(owner, c.graph.dependentsOf(owner.UID))
	if !done {
		c.enqueue(examine)
		return nil
	}
	klog.V(2).InfoS("No blocking dependents left; finishing foreground deletion", "object", describe(owner))
	return c.removeFinalizer(ctx, owner, finalizerForeground)
}

// orphan strips the references to owner from all its dependents, then the
// orphan finalizer from owner.
func (c *Collector) orphan(ctx context.Context, owner object) error {
	for _, d := range c.graph.dependentsOf(owner.UID) {
		removed, err := c.removeOwnerRefs(ctx, d, []types.UID{owner.UID})
		if err != nil {
			return fmt.Errorf("orphan dependents of %s: %w", describe(owner), err)
		}
		if removed {
			c.metrics.orphanings.Inc()
		}
	}
	klog.V(2).InfoS("Dependents orphaned; removing finalizer", "object", describe(owner))
	return c.removeFinalizer(ctx, owner, finalizerOrphan)
}

// deleteDependent deletes o with policy, on the condition that it is still
// the object judged (UID) at the version read (resourceVersion). When only
// the version moved and the owners did not, it deletes on the UID alone, as
// busy objects (pods) change all the time.
func (c *Collector) deleteDependent(ctx context.Context, o object, read *metav1.PartialObjectMetadata, policy metav1.DeletionPropagation) error {
	klog.V(2).InfoS("Deleting dependent", "object", describe(o), "propagationPolicy", policy)
	err := c.delete(ctx, o, read.ResourceVersion, policy)
	if apierrors.IsConflict(err) {
		now, getErr := c.client(o.resource(), o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(getErr):
			return nil
		case getErr != nil:
			return getErr
		case now.UID != o.UID:
			return nil
		case !apiequality.Semantic.DeepEqual(now.OwnerReferences, read.OwnerReferences):
			return fmt.Errorf("owners of %s changed; judging again: %w", describe(o), err)
		}
		err = c.delete(ctx, o, "", policy)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("delete %s: %w", describe(o), err)
	}
	c.metrics.deletions.Inc()
	return nil
}

func (c *Collector) delete(ctx context.Context, o object, resourceVersion string, policy metav1.DeletionPropagation) error {
	pre := &metav1.Preconditions{UID: &o.UID}
	if resourceVersion != "" {
		pre.ResourceVersion = &resourceVersion
	}
	return c.client(o.resource(), o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{Preconditions: pre, PropagationPolicy: &policy})
}

// removeOwnerRefs strips the references to owners from o with a strategic
// merge patch that deletes list items by UID, so it needs no
// resourceVersion; the patch also carries o's UID, which the API server
// refuses to change, so it cannot land on a namesake. Resources without
// strategic merge (custom ones) get a JSON merge patch of the whole list
// at the version read. It reports whether o was still there to patch.
func (c *Collector) removeOwnerRefs(ctx context.Context, o object, owners []types.UID) (bool, error) {
	type del struct {
		Patch string    `json:"$patch"`
		UID   types.UID `json:"uid"`
	}
	dels := make([]del, 0, len(owners))
	for _, uid := range owners {
		dels = append(dels, del{"delete", uid})
	}
	err := c.patch(ctx, o, types.StrategicMergePatchType, map[string]any{"uid": o.UID, "ownerReferences": dels})
	if apierrors.IsUnsupportedMediaType(err) {
		err = c.removeOwnerRefsMerge(ctx, o, owners)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove owner references from %s: %w", describe(o), err)
	}
	return true, nil
}

func (c *Collector) removeOwnerRefsMerge(ctx context.Context, o object, owners []types.UID) error {
	live, err := c.client(o.resource(), o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if live.UID != o.UID {
		return apierrors.NewNotFound(o.resource().GroupResource(), o.Name)
	}
	keep := slices.DeleteFunc(slices.Clone(live.OwnerReferences), func(r metav1.OwnerReference) bool {
		return slices.Contains(owners, r.UID)
	})
	return c.patch(ctx, o, types.MergePatchType, map[string]any{
		"uid": o.UID, "resourceVersion": live.ResourceVersion, "ownerReferences": keep,
	})
}

// removeFinalizer takes finalizer off o with a JSON merge patch of the
// finalizer list at the version read, so a concurrent change of the list
// makes it fail (and retry) instead of dropping someone else's finalizer.
func (c *Collector) removeFinalizer(ctx context.Context, o object, finalizer string) error {
	live, err := c.client(o.resource(), o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read %s: %w", describe(o), err)
	case live.UID != o.UID || !hasFinalizer(live, finalizer):
		return nil
	}
	rest := slices.DeleteFunc(slices.Clone(live.Finalizers), func(f string) bool { return f == finalizer })
	err = c.patch(ctx, o, types.MergePatchType, map[string]any{
		"uid": o.UID, "resourceVersion": live.ResourceVersion, "finalizers": rest,
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s from %s: %w", finalizer, describe(o), err)
	}
	return nil
}

// patch sends {"metadata": md} to o.
func (c *Collector) patch(ctx context.Context, o object, pt types.PatchType, md map[string]any) error {
	data, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return err
	}
	_, err = c.client(o.resource(), o.Namespace).Patch(ctx, o.Name, pt, data, metav1.PatchOptions{})
	return err
}

func (c *Collector) client(gvr schema.GroupVersionResource, namespace string) metadata.ResourceInterface {
	return c.metadata.Resource(gvr).Namespace(namespace)
}

// describe names o in logs and errors: resource namespace/name.
func describe(o object) string {
	if o.Namespace == "" {
		return o.resource().Resource + " " + o.Name
	}
	return o.resource().Resource + " " + o.Namespace + "/" + o.Name
}
