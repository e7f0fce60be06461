package cgroup

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// write creates the files of a fake cgroup file system under root.
func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, v := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hybridRoot is this kind of machine's layout: v1 controllers, one of
// them (memory) placing the agent in a nested cgroup, and an empty cgroup2
// at unified.
func hybridRoot(t *testing.T) (root, self string) {
	root = t.TempDir()
	write(t, root, map[string]string{
		"memory/cgroup.procs":           "",
		"memory/sup/agent/cgroup.procs": "",
		"cpu,cpuacct/cgroup.procs":      "",
		"unified/cgroup.procs":          "",
	})
	self = "4:memory:/sup/agent\n2:cpu,cpuacct:/\n0::/\n"
	return root, self
}

func TestDetect(t *testing.T) {
	hybrid, hybridSelf := hybridRoot(t)
	v2 := t.TempDir()
	write(t, v2, map[string]string{"cgroup.controllers": "cpu memory", "cgroup.procs": ""})
	none := t.TempDir()
	for _, tc := range []struct {
		name, root, self string
		want             *Manager
		wantErr          bool
	}{
		{name: "hybrid v1", root: hybrid, self: hybridSelf, want: &Manager{version: V1, parents: map[string]string{
			"memory":  hybrid + "/memory/sup/agent/portal/node1",
			"cpu":     hybrid + "/cpu,cpuacct/portal/node1",
			"cpuacct": hybrid + "/cpu,cpuacct/portal/node1",
		}, roots: map[string]string{
			"memory":  hybrid + "/memory",
			"cpu":     hybrid + "/cpu,cpuacct",
			"cpuacct": hybrid + "/cpu,cpuacct",
		}}},
		{name: "pure v2", root: v2, self: "0::/system.slice/portal.service\n",
			want: &Manager{version: V2, parents: map[string]string{"": v2 + "/portal/node1"}, roots: map[string]string{"": v2}}},
		{name: "no cgroups", root: none, self: "0::/\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(tc.root, tc.self, "node1")
			if (err != nil) != tc.wantErr {
				t.Fatalf("got error %v, want error %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestContainerLimitsV1(t *testing.T) {
	root, self := hybridRoot(t)
	m, err := Detect(root, self, "")
	if err != nil {
		t.Fatal(err)
	}
	procs, err := m.Container("u1", "web", Limits{MemoryBytes: 20 << 20, CPUMilli: 500, CPURequestMilli: 250})
	if err != nil {
		t.Fatal(err)
	}
	wantProcs := []string{root + "/memory/sup/agent/portal/podu1/web/cgroup.procs", root + "/cpu,cpuacct/portal/podu1/web/cgroup.procs"}
	if !reflect.DeepEqual(procs, wantProcs) {
		t.Errorf("got procs %v, want %v", procs, wantProcs)
	}
	for p, want := range map[string]string{
		"memory/sup/agent/portal/podu1/web/memory.limit_in_bytes": "20971520",
		"cpu,cpuacct/portal/podu1/web/cpu.cfs_period_us":          "100000",
		"cpu,cpuacct/portal/podu1/web/cpu.cfs_quota_us":           "50000",
		"cpu,cpuacct/portal/podu1/web/cpu.shares":                 "256",
	} {
		if got := read(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s: got %q, want %q", p, got, want)
		}
	}
	// No limits: the kernel's "none" values.
	if _, err := m.Container("u1", "idle", Limits{}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"memory/sup/agent/portal/podu1/idle/memory.limit_in_bytes": "-1",
		"cpu,cpuacct/portal/podu1/idle/cpu.cfs_quota_us":           "-1",
		"cpu,cpuacct/portal/podu1/idle/cpu.shares":                 "2",
	} {
		if got := read(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s: got %q, want %q", p, got, want)
		}
	}
}

func TestContainerLimitsV2(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{"cgroup.controllers": "cpu memory pids", "cgroup.subtree_control": "memory"})
	// A real cgroup file system makes these files itself.
	for _, d := range []string{"portal", "portal/n1", "portal/n1/podu1"} {
		write(t, root, map[string]string{d + "/cgroup.subtree_control": ""})
	}
	m, err := Detect(root, "0::/\n", "n1")
	if err != nil {
		t.Fatal(err)
	}
	procs, err := m.Container("u1", "web", Limits{MemoryBytes: 64 << 20, CPUMilli: 1500, CPURequestMilli: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{root + "/portal/n1/podu1/web/cgroup.procs"}; !reflect.DeepEqual(procs, want) {
		t.Errorf("got procs %v, want %v", procs, want)
	}
	for p, want := range map[string]string{
		"cgroup.subtree_control":                 "+cpu", // memory was on already
		"portal/cgroup.subtree_control":          "+memory",
		"portal/n1/cgroup.subtree_control":       "+memory",
		"portal/n1/podu1/cgroup.subtree_control": "+memory",
		"portal/n1/podu1/web/memory.max":         "67108864",
		"portal/n1/podu1/web/cpu.max":            "150000 100000",
		"portal/n1/podu1/web/cpu.weight":         "39",
	} {
		if got := read(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s: got %q, want %q", p, got, want)
		}
	}
}

func TestLimitsArithmetic(t *testing.T) {
	for _, tc := range []struct {
		name           string
		l              Limits
		quota          int64
		shares, weight uint64
	}{
		{name: "none", l: Limits{}, quota: 0, shares: 2, weight: 1},
		{name: "one core", l: Limits{CPUMilli: 1000, CPURequestMilli: 1000}, quota: 100000, shares: 1024, weight: 39},
		{name: "tiny limit raised to the kernel minimum", l: Limits{CPUMilli: 1}, quota: 1000, shares: 2, weight: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.l.Quota(); got != tc.quota {
				t.Errorf("quota: got %d, want %d", got, tc.quota)
			}
			if got := tc.l.Shares(); got != tc.shares {
				t.Errorf("shares: got %d, want %d", got, tc.shares)
			}
			if got := tc.l.Weight(); got != tc.weight {
				t.Errorf("weight: got %d, want %d", got, tc.weight)
			}
		})
	}
}

func TestStatsAndOOM(t *testing.T) {
	v1, self := hybridRoot(t)
	write(t, v1, map[string]string{
		"cpu,cpuacct/portal/podu1/web/cpuacct.usage":              "2500000000\n",
		"cpu,cpuacct/portal/podu1/cpuacct.usage":                  "3000000000\n",
		"memory/sup/agent/portal/podu1/web/memory.usage_in_bytes": "10485760\n",
		"memory/sup/agent/portal/podu1/web/memory.stat":           "cache 4096\ntotal_inactive_file 1048576\n",
		"memory/sup/agent/portal/podu1/memory.usage_in_bytes":     "10485760\n",
		"memory/sup/agent/portal/podu1/memory.stat":               "total_inactive_file 20000000\n",
		"memory/sup/agent/portal/podu1/web/memory.oom_control":    "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
	})
	v2 := t.TempDir()
	write(t, v2, map[string]string{
		"cgroup.controllers":              "",
		"portal/podu1/web/cpu.stat":       "usage_usec 2500000\nuser_usec 2000000\n",
		"portal/podu1/web/memory.current": "10485760\n",
		"portal/podu1/web/memory.stat":    "anon 8000000\ninactive_file 1048576\n",
		"portal/podu1/web/memory.events":  "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\n",
	})
	m1, err := Detect(v1, self, "")
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Detect(v2, "0::/\n", "")
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{CPUNanos: 2500000000, WorkingSetBytes: 9437184}
	for _, tc := range []struct {
		name string
		m    *Manager
		oom  uint64
	}{{"v1", m1, 2}, {"v2", m2, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.m.ContainerStats("u1", "web")
			if err != nil || got != want {
				t.Errorf("got %+v, %v, want %+v", got, err, want)
			}
			if n, err := tc.m.OOMKills("u1", "web"); err != nil || n != tc.oom {
				t.Errorf("oom kills: got %d, %v, want %d", n, err, tc.oom)
			}
		})
	}
	// Inactive cache larger than the usage reads as nothing in use.
	if got, err := m1.PodStats("u1"); err != nil || got != (Stats{CPUNanos: 3000000000}) {
		t.Errorf("pod: got %+v, %v", got, err)
	}
}

func TestPodsAndRemove(t *testing.T) {
	root, self := hybridRoot(t)
	m, err := Detect(root, self, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"a", "b"} {
		if _, err := m.Container(uid, "c", Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	uids, err := m.Pods()
	if err != nil || strings.Join(uids, ",") != "a,b" {
		t.Fatalf("got pods %v, %v, want a,b", uids, err)
	}
	if err := m.RemovePod("a"); err != nil {
		t.Fatal(err)
	}
	if err := m.RemovePod("gone"); err != nil {
		t.Errorf("removing a pod with no cgroup: %v", err)
	}
	if uids, _ := m.Pods(); strings.Join(uids, ",") != "b" {
		t.Errorf("after removal got pods %v, want b", uids)
	}
	for _, d := range []string{"memory/sup/agent/portal/poda", "cpu,cpuacct/portal/poda"} {
		if _, err := os.Stat(filepath.Join(root, d)); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", d, err)
		}
	}
}

// TestNodesApart pins a bug: agents sharing a machine shared one parent,
// and each starting agent took the other's pods for orphans and removed
// their empty cgroups.
func TestNodesApart(t *testing.T) {
	root, self := hybridRoot(t)
	m1, err := Detect(root, self, "node1")
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Detect(root, self, "node2")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m   *Manager
		uid string
	}{{m1, "a"}, {m2, "b"}} {
		if _, err := c.m.Container(c.uid, "c", Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	if uids, err := m1.Pods(); err != nil || strings.Join(uids, ",") != "a" {
		t.Errorf("node1's pods: got %v, %v, want a alone", uids, err)
	}
	if err := m1.RemovePod("a"); err != nil {
		t.Fatal(err)
	}
	if err := m1.RemoveParent(); err != nil {
		t.Fatal(err)
	}
	if uids, err := m2.Pods(); err != nil || strings.Join(uids, ",") != "b" {
		t.Errorf("node2's pods after node1's went: got %v, %v, want b", uids, err)
	}
	if _, err := os.Stat(filepath.Join(root, "cpu,cpuacct/portal/node1")); !os.IsNotExist(err) {
		t.Errorf("node1's parent left behind (%v)", err)
	}
}

// TestNodeStats pins the node's figures to kubelet's: the root cgroup's
// where there is one, never the hypervisor's steal time.
func TestNodeStats(t *testing.T) {
	proc := t.TempDir()
	write(t, proc, map[string]string{
		// busy: user 100, nice 5, system 50, irq 3, softirq 2; steal 7 is not.
		"stat":    "cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n",
		"meminfo": "MemTotal:       1000 kB\nMemFree:         200 kB\nInactive(file):  100 kB\n",
	})
	fromProc := Stats{CPUNanos: 160 * 1e7, WorkingSetBytes: 700 * 1024}
	v1, self := hybridRoot(t)
	write(t, v1, map[string]string{
		"cpu,cpuacct/cpuacct.usage":    "4000000000\n",
		"memory/memory.usage_in_bytes": "3000000\n",
		"memory/memory.stat":           "cache 5\ntotal_inactive_file 1000000\n",
	})
	m1, err := Detect(v1, self, "")
	if err != nil {
		t.Fatal(err)
	}
	v2 := t.TempDir()
	write(t, v2, map[string]string{"cgroup.controllers": "", "cpu.stat": "usage_usec 2500000\nuser_usec 2000000\n"})
	m2, err := Detect(v2, "0::/\n", "")
	if err != nil {
		t.Fatal(err)
	}
	oldV2 := t.TempDir() // a kernel without the root's cpu.stat
	write(t, oldV2, map[string]string{"cgroup.controllers": ""})
	m3, err := Detect(oldV2, "0::/\n", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		read func() (Stats, error)
		want Stats
	}{
		{"no cgroups: /proc", func() (Stats, error) { return NodeStats(proc) }, fromProc},
		{"v1 root cgroup", func() (Stats, error) { return m1.NodeStats(proc) }, Stats{CPUNanos: 4e9, WorkingSetBytes: 2000000}},
		{"v2 root cpu.stat, memory from meminfo", func() (Stats, error) { return m2.NodeStats(proc) }, Stats{CPUNanos: 2.5e9, WorkingSetBytes: 700 * 1024}},
		{"v2 root without cpu.stat", func() (Stats, error) { return m3.NodeStats(proc) }, fromProc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.read()
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v, want %+v", got, err, tc.want)
			}
		})
	}
}

func TestSetupParent(t *testing.T) {
	v1, self := hybridRoot(t)
	m1, err := Detect(v1, self, "")
	if err != nil {
		t.Fatal(err)
	}
	v2 := t.TempDir()
	write(t, v2, map[string]string{"cgroup.controllers": "cpu memory", "cgroup.subtree_control": "cpu memory",
		"portal/cgroup.subtree_control": "cpu memory"})
	m2, err := Detect(v2, "0::/\n", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    *Manager
		file string
		want string
	}{
		{"v1 shares for two cores", m1, v1 + "/cpu,cpuacct/portal/cpu.shares", "2048"},
		{"v2 weight for two cores", m2, v2 + "/portal/cpu.weight", "79"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.m.SetupParent(2000); err != nil {
				t.Fatal(err)
			}
			if got := read(t, tc.file); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := os.Stat(v1 + "/memory/sup/agent/portal"); err != nil {
		t.Errorf("v1 memory parent not made: %v", err)
	}
}

func TestRemoveParent(t *testing.T) {
	root, self := hybridRoot(t)
	m, err := Detect(root, self, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Container("u1", "c", Limits{}); err != nil {
		t.Fatal(err)
	}
	// A pod's left: the parents stay.
	if err := m.RemoveParent(); err != nil {
		t.Fatalf("with a pod left: %v", err)
	}
	if _, err := os.Stat(root + "/cpu,cpuacct/portal/podu1"); err != nil {
		t.Fatalf("a pod's cgroup went with the parent: %v", err)
	}
	if err := m.RemovePod("u1"); err != nil {
		t.Fatal(err)
	}
	// Plain directories stand for cgroups here: empty them of the files
	// a cgroup file system would not have.
	for _, d := range []string{"/cpu,cpuacct/portal", "/memory/sup/agent/portal"} {
		entries, _ := os.ReadDir(root + d)
		for _, e := range entries {
			os.Remove(filepath.Join(root+d, e.Name()))
		}
	}
	if err := m.RemoveParent(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/cpu,cpuacct/portal", "/memory/sup/agent/portal"} {
		if _, err := os.Stat(root + d); !os.IsNotExist(err) {
			t.Errorf("%s left (%v)", d, err)
		}
	}
}
