package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Period is the CFS period a CPU limit is enforced over, in
// microseconds: kubelet's default 100 ms.
const Period = 100000

// minQuota is the smallest CFS quota the kernel accepts, in microseconds.
const minQuota = 1000

// Limits are what a container's cgroup enforces, from its resources.
type Limits struct {
	// MemoryBytes is the memory limit; 0 is none.
	MemoryBytes int64
	// CPUMilli is the CPU limit in thousandths of a core; 0 is none.
	CPUMilli int64
	// CPURequestMilli weighs the container against others when the CPU
	// is busy; 0 is the least weight, as a best-effort pod's.
	CPURequestMilli int64
}

// Quota is the CFS quota per Period for the CPU limit, as kubelet
// computes it; 0 means no limit.
func (l Limits) Quota() int64 {
	if l.CPUMilli <= 0 {
		return 0
	}
	return max(l.CPUMilli*Period/1000, minQuota)
}

// Shares is the v1 cpu.shares for the CPU request, as kubelet computes it.
func (l Limits) Shares() uint64 {
	return max(uint64(max(l.CPURequestMilli, 0))*1024/1000, 2)
}

// Weight is the v2 cpu.weight for the CPU request: the shares mapped
// from [2, 262144] onto [1, 10000], as the OCI runtimes do.
func (l Limits) Weight() uint64 {
	s := min(l.Shares(), 262144)
	return 1 + (s-2)*9999/262142
}

// Container makes (or keeps) the cgroup of container name in pod uid with
// limits l, and returns the cgroup.procs files a process writes its PID
// to ("0", itself) to join it.
func (m *Manager) Container(uid, name string, l Limits) ([]string, error) {
	rel := containerRel(uid, name)
	if m.version == V2 {
		if err := m.enableV2(PodName(uid)); err != nil {
			return nil, err
		}
	}
	var procs []string
	for _, d := range m.dirs(rel) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("make cgroup %s: %w", d, err)
		}
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	if err := m.setLimits(rel, l); err != nil {
		return nil, err
	}
	return procs, nil
}

// SetupParent makes the Portal parent cgroup and weighs it, against the
// node's other processes, for the node's allocatable CPU (in thousandths
// of a core), as kubelet weighs its kubepods cgroup: with the default
// weight, every pod together would count as one process.
func (m *Manager) SetupParent(allocatableMilli int64) error {
	if m.version == V2 {
		if err := m.enableV2(""); err != nil {
			return err
		}
	}
	for _, d := range m.dirs("") {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("make cgroup %s: %w", d, err)
		}
	}
	l := Limits{CPURequestMilli: allocatableMilli}
	if m.version == V2 {
		return writeFile(filepath.Join(m.dir("", ""), "cpu.weight"), strconv.FormatUint(l.Weight(), 10))
	}
	return writeFile(filepath.Join(m.dir("cpu", ""), "cpu.shares"), strconv.FormatUint(l.Shares(), 10))
}

// Procs are the cgroup.procs files of container name's cgroup, which a
// process joins to be counted and limited with it (kubectl exec's
// commands, as a runtime's exec does).
func (m *Manager) Procs(uid, name string) []string {
	var procs []string
	for _, d := range m.dirs(containerRel(uid, name)) {
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	return procs
}

// enableV2 makes the parent and pod cgroups and hands the cpu and memory
// controllers down from the root to the container level.
func (m *Manager) enableV2(pod string) error {
	root, parent := m.roots[""], m.parents[""]
	levels := []string{root}
	for d := parent; d != root && d != filepath.Dir(d); d = filepath.Dir(d) {
		levels = slices.Insert(levels, 1, d)
	}
	levels = append(levels, filepath.Join(parent, pod))
	for i, d := range levels {
		if i > 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("make cgroup %s: %w", d, err)
			}
		}
		ctl := filepath.Join(d, "cgroup.subtree_control")
		b, err := os.ReadFile(ctl)
		if err != nil {
			return err
		}
		have := strings.Fields(string(b))
		for _, c := range []string{"cpu", "memory"} {
			if !contains(have, c) {
				if err := writeFile(ctl, "+"+c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// setLimits writes l to the cgroup rel, lifting a limit l no longer has.
func (m *Manager) setLimits(rel string, l Limits) error {
	if m.version == V2 {
		d := m.dir("", rel)
		mem, cpu := "max", fmt.Sprintf("max %d", Period)
		if l.MemoryBytes > 0 {
			mem = strconv.FormatInt(l.MemoryBytes, 10)
		}
		if q := l.Quota(); q > 0 {
			cpu = fmt.Sprintf("%d %d", q, Period)
		}
		for _, w := range [][2]string{{"memory.max", mem}, {"cpu.max", cpu}, {"cpu.weight", strconv.FormatUint(l.Weight(), 10)}} {
			if err := writeFile(filepath.Join(d, w[0]), w[1]); err != nil {
				return err
			}
		}
		return nil
	}
	mem := "-1"
	if l.MemoryBytes > 0 {
		mem = strconv.FormatInt(l.MemoryBytes, 10)
	}
	quota := int64(-1)
	if q := l.Quota(); q > 0 {
		quota = q
	}
	cpu := m.dir("cpu", rel)
	for _, w := range [][2]string{
		{filepath.Join(m.dir("memory", rel), "memory.limit_in_bytes"), mem},
		// The period first: a quota is checked against the period in place.
		{filepath.Join(cpu, "cpu.cfs_period_us"), strconv.Itoa(Period)},
		{filepath.Join(cpu, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10)},
		{filepath.Join(cpu, "cpu.shares"), strconv.FormatUint(l.Shares(), 10)},
	} {
		if err := writeFile(w[0], w[1]); err != nil {
			return err
		}
	}
	return nil
}
