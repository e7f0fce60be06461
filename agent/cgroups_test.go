//go:build linux

package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"portal.dev/portal/agent/cgroup"
	"portal.dev/portal/agent/container"
)

func TestLimitsOf(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		name string
		res  corev1.ResourceRequirements
		want cgroup.Limits
	}{
		{name: "none", want: cgroup.Limits{}},
		{name: "limits, request from the limit",
			res:  corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("20Mi")}},
			want: cgroup.Limits{MemoryBytes: 20 << 20, CPUMilli: 500, CPURequestMilli: 500}},
		{name: "request below the limit",
			res: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("2")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m")}},
			want: cgroup.Limits{CPUMilli: 2000, CPURequestMilli: 250}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := limitsOf(&corev1.Container{Resources: tc.res}); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestOOMKilledFromTheCgroup: a run is OOMKilled when its cgroup's kill
// count rose during it, whatever its exit code says, and only then.
func TestOOMKilledFromTheCgroup(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"memory", "cpu", "cpuacct"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
		os.WriteFile(filepath.Join(root, d, "cgroup.procs"), nil, 0o644)
	}
	m, err := cgroup.Detect(root, "", "")
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cgroups: m}
	pod := &corev1.Pod{}
	pod.UID = "u1"
	c := &corev1.Container{Name: "main", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("20Mi")}}}
	oomControl := filepath.Join(root, "memory", cgroup.Parent, "podu1", "main", "memory.oom_control")
	setKills := func(n int) {
		os.MkdirAll(filepath.Dir(oomControl), 0o755)
		os.WriteFile(oomControl, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill "+string(rune('0'+n))+"\n"), 0o644)
	}
	setKills(1) // an earlier run's
	cr := &ctrRuntime{st: &ctrState{}}
	var spec container.Spec
	if err := a.joinCgroup(pod, c, cr, &spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Cgroups) != 3 || cr.st.OOMKills != 1 {
		t.Fatalf("got cgroups %v, base %d; want 3 files and base 1", spec.Cgroups, cr.st.OOMKills)
	}
	for _, tc := range []struct {
		name       string
		kills      int
		wantReason string
	}{
		{name: "killed by someone else", kills: 1, wantReason: "Error"},
		{name: "killed by the OOM killer", kills: 2, wantReason: "OOMKilled"},
		{name: "next run ends on its own", kills: 2, wantReason: "Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setKills(tc.kills)
			cr.st.Exited = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}
			a.markOOMKilled(pod.UID, "main", cr.st)
			if got := cr.st.Exited.Reason; got != tc.wantReason {
				t.Errorf("got reason %q, want %q", got, tc.wantReason)
			}
		})
	}
}

// TestCgroupSetupFailureRunsPodsUnlimited pins a bug: a cgroup file
// system the agent may not set up (read-only, or a namespace root that
// holds the agent) kept the manager, and then every pod failed to start.
func TestCgroupSetupFailureRunsPodsUnlimited(t *testing.T) {
	root := t.TempDir()
	// A cgroup v2 root where the parent cannot be made: its name is
	// taken by a file, which fails even for root.
	for name, v := range map[string]string{"cgroup.controllers": "cpu memory", "cgroup.subtree_control": "", cgroup.Parent: ""} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := &Agent{opts: Options{CgroupRoot: root}, runtime: processRuntime{}}
	a.detectCgroups(context.Background())
	if a.cgroups != nil {
		t.Fatalf("got cgroups %v after a failed set-up, want none", a.cgroups.Version())
	}
	pod := &corev1.Pod{}
	pod.UID = "u1"
	var spec container.Spec
	if err := a.joinCgroup(pod, &corev1.Container{Name: "main"}, &ctrRuntime{st: &ctrState{}}, &spec); err != nil || spec.Cgroups != nil {
		t.Errorf("join: got %v, cgroups %v; want the container to start outside any cgroup", err, spec.Cgroups)
	}
}
