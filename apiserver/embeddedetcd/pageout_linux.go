package embeddedetcd

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReleaseDatabasePages gives the pages of etcd's database that this
// process has mapped back to the kernel (MADV_PAGEOUT on the mapping).
//
// etcd reads its bbolt database through a shared, read-only mapping of the
// whole file, so every page a read or a write touched, live or on bbolt's
// free list, stays resident and counts in the process's RSS until the
// kernel is short of memory; a burst of writes leaves some megabytes of
// them. Page-out reclaims the clean pages nobody else maps (bbolt writes
// with pwrite and fdatasync, so dirty ones are written first), which frees
// them for the machine, not only from this process's figure. Nothing is
// lost: the next read of a page faults it in from the file. So it suits a
// quiet moment after a burst, when the pages are not about to be read
// again; an idle server touches only a few.
//
// The mapping is found by its path in /proc/self/maps. Should bbolt remap
// the file in between (it maps 10 GiB up front, so only a database larger
// than that grows its mapping), the advice reaches an unmapped range
// (an error) or another mapping, and page-out never discards data there
// either.
func (s *Server) ReleaseDatabasePages() error {
	if s == nil || s.dbPath == "" {
		return nil
	}
	return pageOut(s.dbPath)
}

// pageOut pages out this process's mappings of the file at path.
func pageOut(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	ranges, err := mappingsOf(path)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		// Past the end of the file nothing is resident.
		n := min(r.end-r.start, uint64(st.Size())-min(r.offset, uint64(st.Size())))
		if n == 0 {
			continue
		}
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(r.start), uintptr(n), unix.MADV_PAGEOUT); e != 0 {
			return fmt.Errorf("page out %s: %w", path, e)
		}
	}
	return nil
}

// mapping is an address range of this process that maps a file from
// offset.
type mapping struct{ start, end, offset uint64 }

// mappingsOf returns the ranges of this process that map path.
func mappingsOf(path string) ([]mapping, error) {
	path = filepath.Clean(path)
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != path {
			continue
		}
		start, end, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		var m mapping
		var errs [3]error
		m.start, errs[0] = strconv.ParseUint(start, 16, 64)
		m.end, errs[1] = strconv.ParseUint(end, 16, 64)
		m.offset, errs[2] = strconv.ParseUint(fields[2], 16, 64)
		if errs[0] != nil || errs[1] != nil || errs[2] != nil || m.end <= m.start {
			continue
		}
		out = append(out, m)
	}
	return out, sc.Err()
}
