package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseImagePages unmaps the read-only parts of the portal executable
// (code, read-only data, function tables) from this process; the next
// touch of a page maps it again from the page cache (or reads it from
// disk, if the kernel reclaimed it meanwhile). It returns how many
// bytes of address space it covered.
//
// The one binary links the API server, etcd, kubectl and the node
// components, and Go runs the initializers of all ~700 packages before
// main, whatever the subcommand. The kernel maps the pages around every
// page such code touches (fault-around, or a whole large folio), so a
// node agent that has just started has tens of MiB of the executable
// mapped, most of which it never touches again. Called once a
// long-running component is up, this leaves it with the pages it uses
// from then on. It frees nothing by itself: the pages stay in the page cache
// (and charged to the same cgroup) for whoever needs them, until the
// kernel reclaims them, which it does sooner for file pages nobody maps.
//
// Only mappings that cannot be written and hold no written page are
// released: dropping a private page that was written (.data, or a
// read-only page the dynamic loader relocated) would bring back the
// file's original contents. The one gap: a breakpoint or uprobe placed
// between reading smaps and the madvise would be dropped for this
// process.
func releaseImagePages() (uint64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	ranges, err := imageRanges(f, exe)
	f.Close()
	if err != nil {
		return 0, err
	}
	var released uint64
	for _, r := range ranges {
		// A raw call: the range is not Go memory, so it has no []byte.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(r[0]), uintptr(r[1]-r[0]), unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise %x-%x: %w", r[0], r[1], errno)
		}
		released += r[1] - r[0]
	}
	return released, nil
}

// imageRanges reads smaps (see proc(5)) and returns the address ranges
// [start, end) that map exe read-only and hold no written page: none in
// memory (Anonymous, AnonHugePages) and none swapped out (Swap).
func imageRanges(smaps io.Reader, exe string) ([][2]uint64, error) {
	var ranges [][2]uint64
	candidate := false // the last range is the current mapping
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "Anonymous" || k == "AnonHugePages" || k == "Swap") {
			if candidate && strings.TrimSpace(v) != "0 kB" {
				ranges, candidate = ranges[:len(ranges)-1], false // written pages: keep it
			}
			continue
		}
		addr, perms, path, ok := smapsHeader(line)
		if !ok {
			continue // one of the current mapping's fields
		}
		candidate = false
		if path != exe || strings.ContainsRune(perms, 'w') {
			continue
		}
		lo, hi, _ := strings.Cut(addr, "-")
		start, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("smaps: %q: %w", line, err)
		}
		end, err := strconv.ParseUint(hi, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("smaps: %q: %w", line, err)
		}
		ranges = append(ranges, [2]uint64{start, end})
		candidate = true
	}
	return ranges, sc.Err()
}

// smapsHeader splits the first line of a mapping in smaps, "address perms
// offset dev inode [path]"; the path is the rest of the line, spaces and
// a " (deleted)" suffix included, as /proc/self/exe reads.
func smapsHeader(line string) (addr, perms, path string, ok bool) {
	var f [5]string
	rest := line
	for i := range f {
		rest = strings.TrimLeft(rest, " ")
		end := strings.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		f[i], rest = rest[:end], rest[end:]
	}
	lo, hi, isRange := strings.Cut(f[0], "-")
	if !isRange || lo == "" || hi == "" || strings.Trim(f[0], "0123456789abcdef-") != "" || f[4] == "" {
		return "", "", "", false
	}
	return f[0], f[1], strings.TrimLeft(rest, " "), true
}
