// Package rss trims the resident set of a process that runs from a large
// binary. It owns nothing but the process's own read-only mappings of its
// executable; it never touches writable or anonymous memory.
//
// Why: the all-in-one portal binary is ~180 MB. On kernels whose page
// cache holds large folios (ext4 and xfs since 6.x), a fault on a binary
// mapped read-only maps the whole folio, up to 2 MiB with one PMD entry,
// so package init, which touches code and read-only data all over the
// binary, leaves ~100 MiB of it mapped (FilePmdMapped in
// /proc/PID/smaps_rollup), most of it never used again. The pages are
// shared page cache, not private memory, but they count in the process's
// RSS, which is what node memory accounting and users look at.
package rss

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// TrimExecutable drops this process's mappings of its executable's
// read-only segments (code and read-only data) and asks the kernel to map
// them back page by page (MADV_NOHUGEPAGE), so what stays resident is what
// runs afterwards. The file's pages stay in the page cache: a page touched
// again costs a minor fault, not a read. Writable mappings are left alone
// (MADV_DONTNEED would discard their contents). It returns the bytes of
// address space it released.
func TrimExecutable() (int64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 00400000-01c0a000 r--p 00000000 fe:00 1234 /path/to/portal
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		for _, advice := range []int{unix.MADV_NOHUGEPAGE, unix.MADV_DONTNEED} {
			if err := madvise(uintptr(start), uintptr(end-start), advice); err != nil {
				return total, fmt.Errorf("madvise %s %d: %w", fields[0], advice, err)
			}
		}
		total += int64(end - start)
	}
	return total, sc.Err()
}

// madvise is madvise(2) on an address range of this process that Go did
// not allocate (unix.Madvise wants a []byte, which would need unsafe).
func madvise(addr, n uintptr, advice int) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, addr, n, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}
