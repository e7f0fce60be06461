package deployment

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"portal.dev/portal/controller/internal/workload"
)

// TestAdoptsOrphanWithTemplate: a ReplicaSet left behind by an orphaning
// delete, with the Deployment's template, is adopted and becomes the new
// one rather than a second ReplicaSet being created.
func TestAdoptsOrphanWithTemplate(t *testing.T) {
	d := web(3, "v1")
	hash := workload.TemplateHash(&d.Spec.Template, nil)
	orphan := rs("web-"+hash, 1, 3)
	orphan.Labels = map[string]string{"app": "web", hashLabel: hash}
	orphan.Spec.Selector = &metav1.LabelSelector{MatchLabels: orphan.Labels}
	orphan.Spec.Template = *d.Spec.Template.DeepCopy()
	orphan.Spec.Template.Labels = orphan.Labels
	setReplicasAnnotations(orphan, 3, 4)
	h := newHarness(t, d, orphan)
	h.sync()
	got, err := h.client.AppsV1().ReplicaSets("ns").Get(context.Background(), orphan.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(got); ref == nil || ref.Name != "web" {
		t.Errorf("controller reference: got %+v, want Deployment web", ref)
	}
	if sizes := h.sizes(); len(sizes) != 1 || sizes[0] != orphan.Name+"=3" {
		t.Errorf("ReplicaSets: got %v, want only the adopted %s=3", sizes, orphan.Name)
	}
}

// TestScaleMidRolloutIsProportional: kubectl scale during a rollout
// shares the new replicas out over the old and new ReplicaSets.
func TestScaleMidRolloutIsProportional(t *testing.T) {
	h := newHarness(t, web(10, "v1"))
	h.sync()
	h.settle()
	h.sync()
	d := h.deployment()
	d.Spec.Template.Spec.Containers[0].Image = "v2"
	if _, err := h.client.AppsV1().Deployments("ns").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.sync() // new ReplicaSet at 1 (maxSurge 1), old at 10; none of its Pods ready
	d = h.deployment()
	d.Spec.Replicas = ptr.To[int32](20)
	if _, err := h.client.AppsV1().Deployments("ns").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.sync()
	sizes := h.sizes()
	var total int
	var counts []int
	for _, s := range sizes {
		n, _ := strconv.Atoi(s[strings.Index(s, "=")+1:])
		total += n
		counts = append(counts, n)
	}
	slices.Sort(counts)
	// 11 Pods at max-replicas 11 grow to 21 (20 + maxSurge 1): the old
	// set's share 10/11 of 21 rounds to 19, the new one's 1/11 to 2.
	if total != 21 || !slices.Equal(counts, []int{2, 19}) {
		t.Errorf("after scaling to 20: got %v, want old 19 and new 2", sizes)
	}
}

// TestHistoryLimitDeletesOldestEmptyReplicaSets rolls out three
// templates with revisionHistoryLimit 1: only the newest old one stays.
func TestHistoryLimitDeletesOldestEmptyReplicaSets(t *testing.T) {
	d := web(1, "v1")
	d.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	h := newHarness(t, d)
	for _, image := range []string{"v2", "v3"} {
		for range 6 {
			h.sync()
			h.settle()
		}
		d = h.deployment()
		d.Spec.Template.Spec.Containers[0].Image = image
		if _, err := h.client.AppsV1().Deployments("ns").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 6 {
		h.sync()
		h.settle()
	}
	rss, _ := h.client.AppsV1().ReplicaSets("ns").List(context.Background(), metav1.ListOptions{})
	var revs []string
	for _, r := range rss.Items {
		revs = append(revs, r.Annotations[RevisionAnnotation])
	}
	slices.Sort(revs)
	if !slices.Equal(revs, []string{"2", "3"}) {
		t.Errorf("revisions left: got %v, want [2 3]", revs)
	}
}

// TestRollbackMovesRevisionOn: when a template comes back (kubectl
// rollout undo), its ReplicaSet takes the next revision and remembers the
// old one, as kubectl rollout history shows it.
func TestRollbackMovesRevisionOn(t *testing.T) {
	d := web(1, "v1")
	r := rs("web-a", 1, 0)
	if !setNewReplicaSetAnnotations(d, r, "3", true) {
		t.Fatal("got no change, want the revision moved on")
	}
	if r.Annotations[RevisionAnnotation] != "3" || r.Annotations[RevisionHistoryAnnotation] != "1" {
		t.Errorf("annotations: got %v, want revision 3 with history 1", r.Annotations)
	}
	if setNewReplicaSetAnnotations(d, r, "3", true) {
		t.Error("second call: got a change, want none")
	}
}

func TestRequeueAfter(t *testing.T) {
	now := epoch.Add(time.Hour)
	d := web(3, "v1")
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
	d.Status.Conditions = []appsv1.DeploymentCondition{newCondition(progressing, corev1.ConditionTrue, reasonRSUpdated, "", now.Add(-20*time.Second))}
	after, ok := requeueAfter(d, appsv1.DeploymentStatus{}, now)
	if !ok || after != 41*time.Second {
		t.Errorf("got %v %v, want 41s: a second past the deadline", after, ok)
	}
	d.Status.Conditions[0].Reason = reasonTimedOut
	if _, ok := requeueAfter(d, appsv1.DeploymentStatus{}, now); ok {
		t.Error("timed out: got a requeue, want none")
	}
}

// TestUndoThroughSync plays kubectl rollout undo: the template goes back
// to v1 after a rollout to v2; v1's ReplicaSet is scaled up again as
// revision 3, remembering it was revision 1, and no third ReplicaSet
// appears.
func TestUndoThroughSync(t *testing.T) {
	h := newHarness(t, web(2, "v1"))
	setImage := func(image string) {
		d := h.deployment()
		d.Spec.Template.Spec.Containers[0].Image = image
		if _, err := h.client.AppsV1().Deployments("ns").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for range 8 {
			h.sync()
			h.settle()
		}
	}
	setImage("v1")
	setImage("v2")
	setImage("v1")
	rss, _ := h.client.AppsV1().ReplicaSets("ns").List(context.Background(), metav1.ListOptions{})
	if len(rss.Items) != 2 {
		t.Fatalf("got %d ReplicaSets, want 2", len(rss.Items))
	}
	for _, r := range rss.Items {
		image := r.Spec.Template.Spec.Containers[0].Image
		rev, hist := r.Annotations[RevisionAnnotation], r.Annotations[RevisionHistoryAnnotation]
		switch {
		case image == "v1" && (rev != "3" || hist != "1" || replicas(&r) != 2):
			t.Errorf("v1: revision %q history %q replicas %d, want 3, 1, 2", rev, hist, replicas(&r))
		case image == "v2" && (rev != "2" || replicas(&r) != 0):
			t.Errorf("v2: revision %q replicas %d, want 2, 0", rev, replicas(&r))
		}
	}
	if got := h.deployment().Annotations[RevisionAnnotation]; got != "3" {
		t.Errorf("deployment revision: got %q, want 3", got)
	}
}
