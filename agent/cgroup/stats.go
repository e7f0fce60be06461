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

// NodeStats reads the whole machine's figures from procDir (/proc): CPU
// time spent outside idle and I/O wait, and memory in use less the
// inactive file cache, as kubelet's root cgroup figures read.
func NodeStats(procDir string) (Stats, error) {
	var s Stats
	b, err := os.ReadFile(filepath.Join(procDir, "stat"))
	if err != nil {
		return s, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return s, fmt.Errorf("%s/stat: no cpu line", procDir)
	}
	// user nice system idle iowait irq softirq steal...
	var busy uint64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("%s/stat: %w", procDir, err)
		}
		busy += n
	}
	s.CPUNanos = busy * (1e9 / userHZ)
	mem := filepath.Join(procDir, "meminfo")
	total, err := readKey(mem, "MemTotal:")
	if err != nil {
		return s, err
	}
	free, err := readKey(mem, "MemFree:")
	if err != nil {
		return s, err
	}
	inactive, err := readKey(mem, "Inactive(file):")
	if err != nil {
		return s, err
	}
	if used := (total - free) * 1024; used > inactive*1024 {
		s.WorkingSetBytes = used - inactive*1024
	}
	return s, nil
}
