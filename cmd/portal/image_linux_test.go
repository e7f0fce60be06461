package main

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// changedAtRun lives in the executable's writable data; the test changes
// it before releasing the image and expects the change to survive.
var changedAtRun = 1

func TestReleaseImagePagesUnmapsOnlyTheReadOnlyImage(t *testing.T) {
	changedAtRun = 42
	before := fileRSSKiB(t)
	released, err := releaseImagePages()
	if err != nil {
		t.Fatal(err)
	}
	after := fileRSSKiB(t)
	t.Logf("file-backed RSS %d KiB -> %d KiB; released %d MiB of address space", before, after, released>>20)
	if released == 0 || after > before/2 {
		t.Errorf("file-backed RSS %d KiB -> %d KiB (released %d bytes): want less than half", before, after, released)
	}
	if changedAtRun != 42 {
		t.Errorf("a variable written before the release reads %d after it, want 42: writable data was dropped", changedAtRun)
	}
	// Code, read-only data and the function tables come back on use.
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs([]string{"--help"})
	cmd.SetOut(&out)
	if err := cmd.Execute(); err != nil || !strings.Contains(out.String(), "kubectl") {
		t.Errorf("portal --help after the release: %v\n%s", err, out.String())
	}
}

func fileRSSKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("RssFile: %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestImageRangesKeepWrittenAndOtherMappings(t *testing.T) {
	const smaps = `00400000-02ed0000 r-xp 00000000 fe:00 99                                 /opt/my portal (deleted)
Size:              43840 kB
Anonymous:             0 kB
AnonHugePages:         0 kB
Swap:                  0 kB
VmFlags: rd ex mr mw me dw sd
02ed0000-063ea000 r--p 02ad0000 fe:00 99                                 /opt/my portal (deleted)
Anonymous:             0 kB
063ea000-06400000 r--p 05fea000 fe:00 99                                 /opt/my portal (deleted)
Anonymous:             8 kB
06400000-06410000 r--p 06000000 fe:00 99                                 /opt/my portal (deleted)
Anonymous:             0 kB
Swap:                  4 kB
06410000-06420000 r--p 06010000 fe:00 99                                 /opt/my portal (deleted)
Anonymous:             0 kB
AnonHugePages:      2048 kB
06420000-06525000 rw-p 06020000 fe:00 99                                 /opt/my portal (deleted)
Anonymous:             0 kB
7f0000000000-7f0000100000 r-xp 00000000 fe:00 42                         /opt/my portal.so
Anonymous:             0 kB
7f0000200000-7f0000300000 r--p 00000000 00:00 0 
Anonymous:             0 kB
`
	got, err := imageRanges(strings.NewReader(smaps), "/opt/my portal (deleted)")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]uint64{{0x400000, 0x2ed0000}, {0x2ed0000, 0x63ea000}}
	if !slices.Equal(got, want) {
		t.Errorf("ranges %x, want %x: only the read-only mappings of the executable with no written page in memory or swap", got, want)
	}
}
