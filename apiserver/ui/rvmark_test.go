package ui

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestRVMarkFollowsStoredObjects: the mark is the newest version seen by
// the handlers, never moves back, and counts a delete's tombstone.
func TestRVMarkFollowsStoredObjects(t *testing.T) {
	var m rvMark
	if got := m.get(); got != "" {
		t.Fatalf("empty mark = %q, want \"\"", got)
	}
	pod := func(rv string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}} }
	m.noteObject(pod("12"))
	m.noteObject(pod("9"))
	if got := m.get(); got != "12" {
		t.Errorf("after 12 then 9: %q, want 12", got)
	}
	m.raise("not-a-version")
	if got := m.get(); got != "12" {
		t.Errorf("after a bad version: %q, want 12", got)
	}
	m.noteDeleted(cache.DeletedFinalStateUnknown{Key: "default/web", Obj: pod("40")})
	if got := m.get(); got != "40" {
		t.Errorf("after a tombstone at 40: %q, want 40", got)
	}
}
