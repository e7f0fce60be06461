package ui

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// rvMark is the newest resourceVersion an informer's store is known to
// hold. The reflector's LastSyncResourceVersion runs ahead of the store
// (events wait in its queue before they are stored), so a list answered
// with it could leave out changes the page's watch from there would
// never send. Event handlers run after the store is updated, so the
// versions they see are ones the store already holds.
type rvMark struct {
	mu sync.Mutex
	rv uint64
}

// track makes m follow inf's events.
func (m *rvMark) track(inf cache.SharedIndexInformer) {
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.noteObject(obj) },
		UpdateFunc: func(_, obj any) { m.noteObject(obj) },
		DeleteFunc: m.noteDeleted,
	})
}

// noteDeleted notes a deleted object, or the last state a tombstone has.
func (m *rvMark) noteDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m.noteObject(obj)
}

func (m *rvMark) noteObject(obj any) {
	if o, err := meta.Accessor(obj); err == nil {
		m.raise(o.GetResourceVersion())
	}
}

// raise moves the mark to rv if rv is newer.
func (m *rvMark) raise(rv string) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	m.mu.Lock()
	m.rv = max(m.rv, n)
	m.mu.Unlock()
}

// get returns the mark as a resourceVersion ("" before anything is known).
func (m *rvMark) get() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rv == 0 {
		return ""
	}
	return strconv.FormatUint(m.rv, 10)
}
