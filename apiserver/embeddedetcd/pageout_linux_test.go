package embeddedetcd

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A file mapped as bbolt maps etcd's database: after pageOut its pages no
// longer count in the process's RSS.
func TestPageOutLeavesTheMappingNotResident(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	const size = 4 << 20
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := unix.Mmap(int(f.Fd()), 0, 2*size, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	var sum byte
	for i := 0; i < size; i += os.Getpagesize() {
		sum += data[i]
	}
	_ = sum
	before := residentKiB(t, path)
	if before < size/1024/2 {
		t.Skipf("only %d KiB of the mapping resident after reading it all", before)
	}
	if err := pageOut(path); err != nil {
		t.Fatal(err)
	}
	if got := residentKiB(t, path); got > before/4 {
		t.Errorf("got %d KiB of the mapping resident after page-out, want at most %d (a quarter of the %d before)", got, before/4, before)
	}
}

// residentKiB is the RSS of this process's mappings of path.
func residentKiB(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var in bool
	var kib int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			in = len(fields) >= 6 && fields[5] == path
		case in && len(fields) >= 2 && fields[0] == "Rss:":
			n, _ := strconv.Atoi(fields[1])
			kib += n
		}
	}
	return kib
}
