package main

import (
	"strconv"
	"testing"

	"portal.dev/portal/controller/podgc"
)

// --terminated-pod-gc-threshold, which the pod garbage collector's options
// named but no command had (review finding 7 of #23), is a flag of
// `portal controller-manager` and `portal server`, with upstream's default.
func TestTerminatedPodGCThresholdFlag(t *testing.T) {
	for _, name := range []string{"controller-manager", "server"} {
		t.Run(name, func(t *testing.T) {
			cmd, _, err := newRootCommand().Find([]string{name})
			if err != nil {
				t.Fatal(err)
			}
			f := cmd.Flags().Lookup("terminated-pod-gc-threshold")
			if f == nil {
				t.Fatalf("portal %s has no --terminated-pod-gc-threshold, want one", name)
			}
			if want := strconv.Itoa(podgc.DefaultTerminatedPodThreshold); f.DefValue != want {
				t.Errorf("default = %s, want %s", f.DefValue, want)
			}
			if err := cmd.Flags().Set("terminated-pod-gc-threshold", "5"); err != nil {
				t.Errorf("set to 5: got %v, want no error", err)
			}
		})
	}
}
