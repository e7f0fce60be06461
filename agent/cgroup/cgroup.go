// Package cgroup owns the node agent's control groups: one per pod under a
// parent named for Portal and the node, one per container inside it
// (`portal/<node>/pod<uid>/<container>`). It creates them with the container's
// limits, reads their CPU and memory figures and out-of-memory kills, and
// removes them. It works at the level of files under a cgroup file system
// root, so that the logic is tested against a temporary directory; it
// starts no process and knows nothing of the API.
//
// Both layouts are supported, detected once at start: cgroup v1 (one
// hierarchy per controller, /sys/fs/cgroup/memory, /sys/fs/cgroup/cpu...,
// possibly with an empty cgroup2 at /sys/fs/cgroup/unified beside them)
// and the pure cgroup v2 single hierarchy.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Version is the cgroup layout of a node.
type Version int

const (
	// V1 is one hierarchy per controller.
	V1 Version = 1
	// V2 is the unified hierarchy.
	V2 Version = 2
)

// Parent is the name of the cgroup that holds every node's pods' parent.
const Parent = "portal"

// ParentName is the path of the cgroup that holds node's pods' cgroups,
// under the cgroup the parent is placed in. Each node has its own, so
// that agents sharing a machine (a test bed, or nodes in containers that
// share a cgroup root) never take each other's pods for orphans.
func ParentName(node string) string { return filepath.Join(Parent, node) }

// v1Controllers are the v1 hierarchies a pod's cgroup is made in.
var v1Controllers = []string{"memory", "cpu", "cpuacct"}

// Manager makes and reads the cgroups of one node's pods. Its zero value
// is not usable; get one from Detect.
type Manager struct {
	version Version
	// parents are the Portal parent directories: one per v1 controller,
	// or the single v2 one under "".
	parents map[string]string
	// roots are the root cgroups, keyed as parents: the node's figures.
	roots map[string]string
}

// Detect finds the layout of the cgroup file system mounted at root
// (/sys/fs/cgroup) and where the parent of node's pods goes in it. self
// is the content of /proc/self/cgroup. In v1 the parent sits under the agent's
// own cgroup of each hierarchy, so that pods stay inside whatever limit
// the node's supervisor gave the agent. In v2 it sits at the root: a
// cgroup that hands controllers to its children may hold no process
// itself, so the agent's own cgroup cannot be the pods' parent.
func Detect(root, self, node string) (*Manager, error) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return &Manager{version: V2, parents: map[string]string{"": filepath.Join(root, ParentName(node))}, roots: map[string]string{"": root}}, nil
	}
	own := parseSelf(self)
	m := &Manager{version: V1, parents: map[string]string{}, roots: map[string]string{}}
	for _, c := range v1Controllers {
		mount, path, ok := v1Mount(root, c, own)
		if !ok {
			return nil, fmt.Errorf("no cgroup v2 at %s and no cgroup v1 %s hierarchy", root, c)
		}
		m.parents[c] = filepath.Join(mount, path, ParentName(node))
		m.roots[c] = mount
	}
	return m, nil
}

// parseSelf maps each controller (and each named or v2 hierarchy's
// controller list) of /proc/self/cgroup to the process's path in it.
func parseSelf(self string) map[string][2]string {
	own := map[string][2]string{}
	for _, line := range strings.Split(self, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = [2]string{parts[1], parts[2]}
		}
	}
	return own
}

// v1Mount is the mount directory of controller c's hierarchy (named for
// the controllers it holds, "cpu,cpuacct", or for c alone) and the
// agent's path in it.
func v1Mount(root, c string, own map[string][2]string) (mount, path string, ok bool) {
	line, known := own[c]
	path = "/"
	if known {
		path = line[1]
	}
	candidates := []string{filepath.Join(root, c)}
	if known {
		candidates = append([]string{filepath.Join(root, line[0])}, candidates...)
	}
	for _, d := range candidates {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			// A hierarchy mounted at the agent's own cgroup (a cgroup
			// namespace) does not show the path above it.
			if _, err := os.Stat(filepath.Join(d, path)); err != nil {
				path = "/"
			}
			return d, path, true
		}
	}
	return "", "", false
}

// Version is the node's cgroup layout.
func (m *Manager) Version() Version { return m.version }

// dirs are a cgroup's directories, one per hierarchy; rel is its path
// under the Portal parent. Two v1 controllers of one hierarchy share it.
func (m *Manager) dirs(rel string) []string {
	if m.version == V2 {
		return []string{filepath.Join(m.parents[""], rel)}
	}
	var out []string
	seen := map[string]bool{}
	for _, c := range v1Controllers {
		d := filepath.Join(m.parents[c], rel)
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// dir is the directory of rel in the hierarchy of controller c (ignored
// in v2).
func (m *Manager) dir(c, rel string) string {
	if m.version == V2 {
		return filepath.Join(m.parents[""], rel)
	}
	return filepath.Join(m.parents[c], rel)
}

// PodName is the cgroup name of the pod with this UID.
func PodName(uid string) string { return "pod" + uid }

func containerRel(podUID, name string) string { return filepath.Join(PodName(podUID), name) }

// Pods are the UIDs of the pods that have a cgroup.
func (m *Manager) Pods() ([]string, error) {
	seen := map[string]bool{}
	var uids []string
	for _, parent := range m.parents {
		entries, err := os.ReadDir(parent)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if uid, ok := strings.CutPrefix(e.Name(), "pod"); ok && e.IsDir() && !seen[uid] {
				seen[uid] = true
				uids = append(uids, uid)
			}
		}
	}
	return uids, nil
}

// RemovePod removes the pod's cgroups, its containers' first. A cgroup
// that still holds a process is left (the kernel refuses to remove it);
// the error says so.
func (m *Manager) RemovePod(uid string) error {
	var errs []error
	for _, d := range m.dirs(PodName(uid)) {
		entries, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				errs = append(errs, rmdir(filepath.Join(d, e.Name())))
			}
		}
		errs = append(errs, rmdir(d))
	}
	return errors.Join(errs...)
}

// RemoveParent removes the node's parent cgroups if no pod's is left in
// them (a node that stops running Portal, or a test's cleanup), and
// Portal's above them if no other node's is. A cgroup that still has
// children is kept (the kernel refuses to remove it), and that is not an
// error.
func (m *Manager) RemoveParent() error {
	var errs []error
	for _, d := range m.dirs("") {
		for _, dir := range []string{d, filepath.Dir(d)} {
			err := syscall.Rmdir(dir)
			if err != nil && !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}

// rmdir removes a cgroup directory. A cgroup's files are the kernel's and
// go with it; a plain directory (the tests') is emptied first.
func rmdir(d string) error {
	err := syscall.Rmdir(d)
	if errors.Is(err, syscall.ENOTEMPTY) {
		err = os.RemoveAll(d)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove cgroup %s: %w", d, err)
	}
	return nil
}

// readUint reads a file holding one number.
func readUint(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// readKey reads the value of key in a flat-keyed file ("key value" per
// line: memory.stat, memory.events, cpu.stat, memory.oom_control; a unit
// after the value, as /proc/meminfo has, is ignored). A missing key reads
// as 0.
func readKey(p, key string) (uint64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) >= 2 && f[0] == key {
			return strconv.ParseUint(f[1], 10, 64)
		}
	}
	return 0, s.Err()
}

func writeFile(p, v string) error {
	if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
		return fmt.Errorf("write %q to %s: %w", v, p, err)
	}
	return nil
}
