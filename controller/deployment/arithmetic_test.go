package deployment

import (
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestResolveFenceposts(t *testing.T) {
	pct := intstr.FromString
	num := intstr.FromInt32
	tests := []struct {
		name                string
		surge, unavailable  intstr.IntOrString
		replicas            int32
		wantSurge, wantUnav int32
	}{
		{"defaults on 10", pct("25%"), pct("25%"), 10, 3, 2},
		{"surge rounds up, unavailable down", pct("25%"), pct("25%"), 3, 1, 0},
		{"both zero lets one be unavailable", num(0), num(0), 3, 0, 1},
		{"both zero percent lets one be unavailable", pct("0%"), pct("0%"), 10, 0, 1},
		{"absolute values", num(2), num(1), 5, 2, 1},
		{"100 percent", pct("100%"), pct("0%"), 4, 4, 0},
		{"percent of zero replicas", pct("25%"), pct("25%"), 0, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, u := resolveFenceposts(&tc.surge, &tc.unavailable, tc.replicas)
			if s != tc.wantSurge || u != tc.wantUnav {
				t.Errorf("got surge %d unavailable %d, want %d %d", s, u, tc.wantSurge, tc.wantUnav)
			}
		})
	}
}

func TestMaxUnavailableCappedAtReplicas(t *testing.T) {
	d := rolling("web", 3, intstr.FromInt32(0), intstr.FromInt32(5))
	if got := maxUnavailable(d); got != 3 {
		t.Errorf("got %d, want 3", got)
	}
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	if got := maxUnavailable(d); got != 0 {
		t.Errorf("Recreate: got %d, want 0", got)
	}
}

func TestNewRSReplicas(t *testing.T) {
	tests := []struct {
		name            string
		surge           intstr.IntOrString
		oldSize, newNow int32
		want            int32
	}{
		{"surge 1 over a full old set", intstr.FromInt32(1), 3, 0, 1},
		{"no room left", intstr.FromInt32(1), 3, 1, 1},
		{"room as old shrinks", intstr.FromInt32(1), 1, 2, 3},
		{"never above replicas", intstr.FromInt32(10), 0, 0, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := rolling("web", 3, tc.surge, intstr.FromInt32(0))
			old, newRS := rs("web-old", 1, tc.oldSize), rs("web-new", 2, tc.newNow)
			if got := newRSReplicas(d, []*appsv1.ReplicaSet{old, newRS}, newRS); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestProportionalSizes(t *testing.T) {
	tests := []struct {
		name          string
		replicas      int32
		surge         int32
		sizes         []int32 // oldest first
		maxAnnotation int32
		want          []int32
		wantOp        string
	}{
		{"scale up 10 to 20 shares by size", 20, 0, []int32{6, 4}, 10, []int32{12, 8}, "up"},
		{"scale down 10 to 5 shares by size", 5, 0, []int32{6, 4}, 10, []int32{3, 2}, "down"},
		{"leftover goes to the largest", 11, 0, []int32{5, 5}, 10, []int32{5, 6}, "up"},
		{"scale to zero empties all", 0, 0, []int32{6, 4}, 10, []int32{0, 0}, "down"},
		{"surge counts in the new total", 10, 2, []int32{6, 4}, 10, []int32{7, 5}, "up"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := rolling("web", tc.replicas, intstr.FromInt32(tc.surge), intstr.FromInt32(1))
			var active []*appsv1.ReplicaSet
			for i, n := range tc.sizes {
				r := rs("web-"+strconv.Itoa(i), int64(i+1), n)
				setReplicasAnnotations(r, tc.maxAnnotation, tc.maxAnnotation)
				active = append(active, r)
			}
			names := []string{active[0].Name, active[1].Name}
			sizes, op := proportionalSizes(d, active)
			for i, name := range names {
				if sizes[name] != tc.want[i] {
					t.Errorf("%s: got %d, want %d", name, sizes[name], tc.want[i])
				}
			}
			if op != tc.wantOp {
				t.Errorf("operation: got %q, want %q", op, tc.wantOp)
			}
		})
	}
}

func TestCleanable(t *testing.T) {
	d := rolling("web", 3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	r1, r2, r3, r4 := rs("web-1", 1, 0), rs("web-2", 2, 0), rs("web-3", 3, 0), rs("web-4", 4, 0)
	r2.Status.Replicas = 1 // Pods still going away
	got := cleanable(d, []*appsv1.ReplicaSet{r4, r3, r2, r1})
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	if len(names) != 2 || names[0] != "web-1" || names[1] != "web-3" {
		t.Errorf("got %v, want [web-1 web-3]: lowest revisions beyond the limit, none with Pods", names)
	}
}

func TestAppendHistory(t *testing.T) {
	if got := appendHistory("", "1"); got != "1" {
		t.Errorf("got %q, want 1", got)
	}
	if got := appendHistory("1,3", "4"); got != "1,3,4" {
		t.Errorf("got %q, want 1,3,4", got)
	}
}

// rolling returns a RollingUpdate Deployment ns/name.
func rolling(name string, replicas int32, surge, unavailable intstr.IntOrString) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable},
			},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

// rs returns a ReplicaSet of the given revision and size, created in
// revision order.
func rs(name string, rev int64, size int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(rev) * time.Minute)),
			Annotations:       map[string]string{RevisionAnnotation: strconv.FormatInt(rev, 10)},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: &size},
	}
}
