package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rsManifest is a ReplicaSet "web" of replicas Pods that sleep and are
// ready while no file named after them exists in dir.
func rsManifest(replicas int, dir string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web
spec:
  replicas: %d
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: debian
        command: [sh, -c, "exec sleep 3600"]
        readinessProbe:
          periodSeconds: 1
          failureThreshold: 1
          exec:
            command: [sh, -c, "test ! -e %s/$(hostname)"]
`, replicas, dir)
}

// TestReplicaSet: a ReplicaSet's Pods run on the node agents, become
// ready, are replaced when deleted and leave not-ready ones first on a
// scale-down; an orphan matching the selector is adopted; the Pods go with
// the ReplicaSet.
func TestReplicaSet(t *testing.T) {
	ab := newAgentBed(t)
	ctx := context.Background()
	pods := ab.c.CoreV1().Pods("default")
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	// An orphan that matches the selector before the ReplicaSet exists: it
	// is adopted and counts as one of the three.
	adoptee := sh("adoptee", "exec sleep 3600")
	adoptee.Labels = map[string]string{"app": "web"}
	ab.create(adoptee)
	kubectl(t, ab.server, "default", rsManifest(3, dir), "apply", "-f", "-")

	webPods := func() []corev1.Pod {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		var out []corev1.Pod
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		return out
	}
	settled := func(n int) func() (bool, string) {
		return func() (bool, string) {
			ps := webPods()
			rs, err := ab.c.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ready := 0
			for _, p := range ps {
				if podReady(&p) && metav1.IsControlledBy(&p, rs) {
					ready++
				}
			}
			st := rs.Status
			return len(ps) == n && ready == n && st.ReadyReplicas == int32(n) && st.AvailableReplicas == int32(n) &&
					st.ObservedGeneration == rs.Generation,
				fmt.Sprintf("%d pods, %d ready and owned; status %+v", len(ps), ready, st)
		}
	}
	eventuallyWithin(t, time.Minute, "3 ready replicas", settled(3))
	if p := ab.get("adoptee"); p == nil || metav1.GetControllerOf(p) == nil || metav1.GetControllerOf(p).Name != "web" {
		t.Fatalf("adoptee: got %v, want controlled by ReplicaSet web", p)
	}

	t.Run("deleted pod is replaced", func(t *testing.T) {
		before := rsPodNames(webPods())
		victim := before[0]
		if err := pods.Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventuallyWithin(t, time.Minute, "a replacement", func() (bool, string) {
			ok, detail := settled(3)()
			return ok && !slices.Contains(rsPodNames(webPods()), victim), detail
		})
	})

	t.Run("scale down removes the not-ready first", func(t *testing.T) {
		current := rsPodNames(webPods())
		keep := current[1]
		for _, n := range []string{current[0], current[2]} {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		eventuallyWithin(t, 30*time.Second, "two pods not ready", func() (bool, string) {
			notReady := 0
			for _, p := range webPods() {
				if !podReady(&p) {
					notReady++
				}
			}
			return notReady == 2, fmt.Sprintf("%d not ready", notReady)
		})
		kubectl(t, ab.server, "default", "", "scale", "replicaset/web", "--replicas=1")
		eventuallyWithin(t, time.Minute, "one ready replica", settled(1))
		if got := rsPodNames(webPods()); !slices.Equal(got, []string{keep}) {
			t.Errorf("pods left: got %v, want [%s]", got, keep)
		}
		events := kubectl(t, ab.server, "default", "", "get", "events", "--field-selector", "involvedObject.name=web",
			"-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}")
		for _, want := range []string{"SuccessfulCreate", "SuccessfulDelete"} {
			if !strings.Contains(events, want) {
				t.Errorf("events of web: got %q, want a %s", events, want)
			}
		}
	})

	t.Run("deleting the replicaset deletes its pods", func(t *testing.T) {
		kubectl(t, ab.server, "default", "", "delete", "replicaset", "web")
		eventuallyWithin(t, time.Minute, "pods gone", func() (bool, string) {
			list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, err.Error()
			}
			_, err = ab.c.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
			return len(list.Items) == 0 && apierrors.IsNotFound(err), fmt.Sprintf("%d pods left, replicaset: %v", len(list.Items), err)
		})
	})
}

func rsPodNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}
