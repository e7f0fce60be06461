package main

import (
	"os"
	"testing"
)

// The mappings of this test's own process: its executable and anonymous
// memory are resident, and it maps no etcd database.
func TestReadMappingsOwnProcess(t *testing.T) {
	s := &sampler{pid: os.Getpid()}
	var b breakdown
	if err := s.readMappings(&b); err != nil {
		t.Fatal(err)
	}
	if b.binary <= 0 || b.anon <= 0 {
		t.Errorf("got binary %.1f MiB, anonymous %.1f MiB; want both above 0", b.binary, b.anon)
	}
	if b.db != 0 || b.dbSize != 0 {
		t.Errorf("got database %.1f MiB of a %.1f MiB file, want none", b.db, b.dbSize)
	}
}
