package resourcemetrics

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWriteThenParse(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_123)
	want := Sample{
		Node: Usage{CPUSeconds: 1234.5, MemoryBytes: 8 << 30, Time: t0},
		Pods: []Pod{
			{Namespace: "default", Name: "busy", Usage: Usage{CPUSeconds: 12.25, MemoryBytes: 1 << 20, Time: t0},
				Containers: []Container{{Name: "spin", Usage: Usage{CPUSeconds: 12.25, MemoryBytes: 1 << 20, Time: t0}}}},
			{Namespace: "kube-system", Name: "two", Usage: Usage{CPUSeconds: 0.5, MemoryBytes: 3 << 20, Time: t0},
				Containers: []Container{
					{Name: "a", Usage: Usage{CPUSeconds: 0.25, MemoryBytes: 1 << 20, Time: t0}},
					{Name: "b", Usage: Usage{CPUSeconds: 0.25, MemoryBytes: 2 << 20, Time: t0}},
				}},
		},
	}
	var buf bytes.Buffer
	if err := Write(&buf, want, false); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`container_cpu_usage_seconds_total{container="spin",namespace="default",pod="busy"} 12.250000000 1700000000123`,
		`pod_memory_working_set_bytes{namespace="kube-system",pod="two"} 3145728 1700000000123`,
		`node_memory_working_set_bytes 8589934592 1700000000123`,
		`scrape_error 0`,
	} {
		if !strings.Contains(buf.String(), line+"\n") {
			t.Errorf("output lacks %q:\n%s", line, buf.String())
		}
	}
	got, err := Parse(&buf, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsed sample differs (-want +got):\n%s", diff)
	}
}

func TestParseWithoutTimestamps(t *testing.T) {
	now := time.Unix(100, 0)
	got, err := Parse(strings.NewReader("node_cpu_usage_seconds_total 5\nnode_memory_working_set_bytes 10\n"), now)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Usage{CPUSeconds: 5, MemoryBytes: 10, Time: now}); got.Node != want {
		t.Errorf("got %+v, want %+v", got.Node, want)
	}
	if _, err := Parse(strings.NewReader("not { prometheus"), now); err == nil {
		t.Error("got no error for garbage")
	}
}
