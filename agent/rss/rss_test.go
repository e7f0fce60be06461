package rss

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// TestTrimExecutable: after the trim the process runs on (code and
// read-only data fault back in), and only read-only mappings of the
// executable without private pages were dropped. Regression: the first
// version dropped the relocated (RELRO) part of a dynamically linked
// binary, and the next call through the GOT jumped to address 0.
func TestTrimExecutable(t *testing.T) {
	_ = net.ParseIP // links package net, and with it libc where cgo is on
	n, err := TrimExecutable()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("got 0 bytes released, want the executable's read-only mappings")
	}
	// Code, read-only data and libc calls all work after the trim.
	if got := fmt.Sprintf("%s-%d", strings.ToUpper("ok"), 42); got != "OK-42" {
		t.Errorf("got %q after the trim, want OK-42", got)
	}
	if _, err := net.LookupHost("localhost"); err != nil {
		t.Errorf("resolve localhost after the trim: %v", err)
	}
	if _, err := os.Hostname(); err != nil {
		t.Errorf("hostname after the trim: %v", err)
	}
}
