package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseImagePages unmaps the read-only parts of the portal executable
// (code, read-only data, function tables) from this process; the next
// touch of a page maps it again from the page cache. It returns how many
// bytes of address space it covered.
//
// The one binary links the API server, etcd, kubectl and the node
// components, and Go runs the initializers of all ~700 packages before
// main, whatever the subcommand. The kernel maps up to 64 KiB around
// every page such code touches (fault-around), so a node agent that has
// just started maps about 60 MiB of the executable it will never run
// again. Called once a long-running component is up, this leaves it with
// the pages it actually uses: bench/agent with 100 pods, 59 MiB of RSS
// instead of 90-111 MiB. The pages stay in the page cache for whoever
// needs them, and the kernel can reclaim them like any unmapped file page.
//
// Only mappings without write permission are touched: a private writable
// mapping (.data) would lose its contents.
func releaseImagePages() (uint64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var released uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) != 6 || fields[5] != exe || strings.ContainsRune(fields[1], 'w') {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		start, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			return released, fmt.Errorf("/proc/self/maps: %q: %w", sc.Text(), err)
		}
		end, err := strconv.ParseUint(hi, 16, 64)
		if err != nil {
			return released, fmt.Errorf("/proc/self/maps: %q: %w", sc.Text(), err)
		}
		// A raw call: the range is not Go memory, so it has no []byte.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise %s: %w", fields[0], errno)
		}
		released += end - start
	}
	return released, sc.Err()
}
