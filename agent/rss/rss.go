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
	"encoding/binary"
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
// again costs a minor fault, not a read. Private pages are kept: writable
// data, and the read-only pages the dynamic linker relocated (RELRO)
// before protecting them, would lose their contents (the first version of
// this dropped a relocated GOT, and the next call through it jumped to
// address 0). It returns the bytes it released.
func TrimExecutable() (int64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	maps, err := readMappings()
	if err != nil {
		return 0, err
	}
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, err
	}
	defer pagemap.Close()
	page := uintptr(os.Getpagesize())
	var total int64
	for _, m := range maps {
		if m.path != exe || strings.Contains(m.perms, "w") {
			continue
		}
		if err := madvise(m.start, m.end-m.start, unix.MADV_NOHUGEPAGE); err != nil {
			return total, fmt.Errorf("madvise %x-%x NOHUGEPAGE: %w", m.start, m.end, err)
		}
		private, err := privatePages(pagemap, m.start, m.end, page)
		if err != nil {
			return total, err
		}
		// Drop each run of pages between private ones.
		from := m.start
		for addr := m.start; addr <= m.end; addr += page {
			if addr < m.end && !private[(addr-m.start)/page] {
				continue
			}
			if addr > from {
				if err := madvise(from, addr-from, unix.MADV_DONTNEED); err != nil {
					return total, fmt.Errorf("madvise %x-%x DONTNEED: %w", from, addr, err)
				}
				total += int64(addr - from)
			}
			from = addr + page
		}
	}
	return total, nil
}

// privatePages reports, page by page, whether [start, end) holds a private
// (anonymous, copied-on-write) page there, from /proc/self/pagemap: bit 63
// present, bit 62 swapped, bit 61 file-backed or shared.
func privatePages(pagemap *os.File, start, end, page uintptr) ([]bool, error) {
	n := int((end - start) / page)
	buf := make([]byte, 8*n)
	if _, err := pagemap.ReadAt(buf, int64(start/page)*8); err != nil {
		return nil, fmt.Errorf("read pagemap: %w", err)
	}
	out := make([]bool, n)
	for i := range out {
		e := binary.LittleEndian.Uint64(buf[8*i:])
		present, swapped, file := e&(1<<63) != 0, e&(1<<62) != 0, e&(1<<61) != 0
		out[i] = swapped || (present && !file)
	}
	return out, nil
}

// mapping is one line of /proc/self/maps.
type mapping struct {
	start, end uintptr
	perms      string
	path       string
}

func readMappings() ([]mapping, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		// 00400000-01c0a000 r--p 00000000 fe:00 1234 /path/to/portal
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok || len(fields) < 5 {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		m := mapping{start: uintptr(start), end: uintptr(end), perms: fields[1]}
		if len(fields) >= 6 {
			m.path = fields[5]
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// madvise is madvise(2) on an address range of this process that Go did
// not allocate (unix.Madvise wants a []byte, which would need unsafe).
func madvise(addr, n uintptr, advice int) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, addr, n, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}
