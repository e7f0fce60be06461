package host

import (
	"os"
	"testing"
)

func TestOwnProcess(t *testing.T) {
	st := MiB(os.Getpid(), "status")
	if st["VmRSS"] <= 0 || st["RssAnon"] <= 0 || st["VmRSS"] < st["RssAnon"] {
		t.Errorf("VmRSS %v MiB, RssAnon %v MiB: want both above 0, VmRSS the larger", st["VmRSS"], st["RssAnon"])
	}
	for i := 0; CPU(os.Getpid()) == 0; i++ {
		if i > 1e9 {
			t.Fatal("no CPU time after a busy loop")
		}
	}
	if got := MiB(1<<30, "status"); len(got) != 0 {
		t.Errorf("a process that does not exist: %v, want nothing", got)
	}
}
