package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Stats are a cgroup's figures at one moment.
type Stats struct {
	// CPUNanos is the CPU time used since the cgroup was made.
	CPUNanos uint64
	// WorkingSetBytes is the memory in use that the kernel could not
	// simply drop: usage less the inactive file cache, as kubelet
	// reports it and the memory limit is judged against.
	WorkingSetBytes uint64
}

// ContainerStats reads the figures of container name in pod uid.
func (m *Manager) ContainerStats(uid, name string) (Stats, error) {
	return m.stats(containerRel(uid, name))
}

// PodStats reads the figures of the pod uid, its containers' together.
func (m *Manager) PodStats(uid string) (Stats, error) {
	return m.stats(PodName(uid))
}

func (m *Manager) stats(rel string) (Stats, error) {
	var s Stats
	var usage, inactive uint64
	var err error
	if m.version == V2 {
		d := m.dir("", rel)
		var usec uint64
		if usec, err = readKey(filepath.Join(d, "cpu.stat"), "usage_usec"); err != nil {
			return s, err
		}
		s.CPUNanos = usec * 1000
		if usage, err = readUint(filepath.Join(d, "memory.current")); err != nil {
			return s, err
		}
		if inactive, err = readKey(filepath.Join(d, "memory.stat"), "inactive_file"); err != nil {
			return s, err
		}
	} else {
		if s.CPUNanos, err = readUint(filepath.Join(m.dir("cpuacct", rel), "cpuacct.usage")); err != nil {
			return s, err
		}
		mem := m.dir("memory", rel)
		if usage, err = readUint(filepath.Join(mem, "memory.usage_in_bytes")); err != nil {
			return s, err
		}
		if inactive, err = readKey(filepath.Join(mem, "memory.stat"), "total_inactive_file"); err != nil {
			return s, err
		}
	}
	if usage > inactive {
		s.WorkingSetBytes = usage - inactive
	}
	return s, nil
}

// OOMKills is how many processes the kernel's out-of-memory killer has
// killed in container name's cgroup since it was made: the oom_kill count
// of memory.events (v2) or memory.oom_control (v1).
func (m *Manager) OOMKills(uid, name string) (uint64, error) {
	rel := containerRel(uid, name)
	if m.version == V2 {
		return readKey(filepath.Join(m.dir("", rel), "memory.events"), "oom_kill")
	}
	return readKey(filepath.Join(m.dir("memory", rel), "memory.oom_control"), "oom_kill")
}

// userHZ is the unit of /proc/stat's CPU times, fixed at 100 per second
// for user space whatever the kernel's tick.
const userHZ = 100

// NodeStats reads the node's figures as kubelet reports them, from the
// root cgroup of the agent's view (the whole machine, or the node's
// container when the agent runs in one with its own cgroup namespace).
// What the root cgroup does not hold is read from procDir (/proc): v2's
// root has no memory.current, so its memory is /proc/meminfo's, as the
// runtimes compute it there, and a kernel without a root cpu.stat gets
// /proc/stat's CPU time.
func (m *Manager) NodeStats(procDir string) (Stats, error) {
	var s Stats
	var err error
	if m.version == V2 {
		var usec uint64
		if usec, err = readKey(filepath.Join(m.roots[""], "cpu.stat"), "usage_usec"); err == nil {
			s.CPUNanos = usec * 1000
		}
	} else {
		s.CPUNanos, err = readUint(filepath.Join(m.roots["cpuacct"], "cpuacct.usage"))
	}
	if err != nil {
		if s.CPUNanos, err = procCPU(procDir); err != nil {
			return s, err
		}
	}
	if m.version == V1 {
		mem := m.roots["memory"]
		usage, err := readUint(filepath.Join(mem, "memory.usage_in_bytes"))
		if err == nil {
			var inactive uint64
			if inactive, err = readKey(filepath.Join(mem, "memory.stat"), "total_inactive_file"); err == nil {
				if usage > inactive {
					s.WorkingSetBytes = usage - inactive
				}
				return s, nil
			}
		}
	}
	s.WorkingSetBytes, err = procMemory(procDir)
	return s, err
}

// NodeStats reads the whole machine's figures from procDir (/proc), for
// a node without cgroups: CPU time spent outside idle, I/O wait and steal,
// and memory in use less the inactive file cache, as kubelet's root
// cgroup figures read.
func NodeStats(procDir string) (Stats, error) {
	var s Stats
	var err error
	if s.CPUNanos, err = procCPU(procDir); err != nil {
		return s, err
	}
	s.WorkingSetBytes, err = procMemory(procDir)
	return s, err
}

// procCPU is the CPU time /proc/stat counts as busy. Steal is time the
// hypervisor gave another machine, and guest time is already in user;
// neither is the node's, as a root cgroup does not count them.
func procCPU(procDir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(procDir, "stat"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("%s/stat: no cpu line", procDir)
	}
	// user nice system idle iowait irq softirq steal guest guest_nice
	var busy uint64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 7 {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/stat: %w", procDir, err)
		}
		busy += n
	}
	return busy * (1e9 / userHZ), nil
}

// procMemory is /proc/meminfo's memory in use less the inactive file
// cache.
func procMemory(procDir string) (uint64, error) {
	mem := filepath.Join(procDir, "meminfo")
	total, err := readKey(mem, "MemTotal:")
	if err != nil {
		return 0, err
	}
	free, err := readKey(mem, "MemFree:")
	if err != nil {
		return 0, err
	}
	inactive, err := readKey(mem, "Inactive(file):")
	if err != nil {
		return 0, err
	}
	if used := (total - free) * 1024; used > inactive*1024 {
		return used - inactive*1024, nil
	}
	return 0, nil
}
