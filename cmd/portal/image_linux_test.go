package main

import (
	"bytes"
	"os"
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
