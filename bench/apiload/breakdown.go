package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// breakdown is where the server's resident memory is at one moment, just
// after a collection the bench forced: what the RSS holds beyond the live
// heap. All figures are MiB.
type breakdown struct {
	// From the server's /metrics after the collection.
	live      float64 // heap objects that survived it
	heapInuse float64 // heap spans in use: live objects and the free slots between them
	stacks    float64 // goroutine stacks
	runtime   float64 // GC metadata, span structures, profiling buckets, other
	// From /proc/PID/smaps.
	anon   float64 // anonymous RSS
	binary float64 // file-backed RSS of the portal executable
	db     float64 // file-backed RSS of etcd's bbolt database
	dbSize float64 // the database file's size
	file   float64 // the rest of the file-backed RSS (shared libraries)
}

// freeInSpans is the free space inside heap spans in use: slots of dead
// objects in spans that still hold a live one, which the runtime cannot
// return to the system until every object in the span is dead.
func (b breakdown) freeInSpans() float64 { return b.heapInuse - b.live }

// readBreakdown forces a collection in the server (its /debug/pprof/heap
// with gc=1) and reads where its memory is. It disturbs the server's
// memory, so the bench takes it only after the samples it compares.
func (s *sampler) readBreakdown(ctx context.Context) (breakdown, error) {
	var b breakdown
	rc := s.client.CoreV1().RESTClient()
	if _, err := rc.Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx); err != nil {
		return b, fmt.Errorf("force a collection: %w", err)
	}
	data, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return b, fmt.Errorf("read metrics: %w", err)
	}
	m := parseMetrics(data)
	mib := func(names ...string) float64 {
		var sum float64
		for _, n := range names {
			sum += m[n] / (1 << 20)
		}
		return sum
	}
	b.live, b.heapInuse = mib("go_memstats_heap_alloc_bytes"), mib("go_memstats_heap_inuse_bytes")
	b.stacks = mib("go_memstats_stack_sys_bytes")
	b.runtime = mib("go_memstats_gc_sys_bytes", "go_memstats_mspan_sys_bytes", "go_memstats_mcache_sys_bytes",
		"go_memstats_buck_hash_sys_bytes", "go_memstats_other_sys_bytes")
	return b, s.readMappings(&b)
}

// readMappings adds up the resident pages of each mapping of the server
// from /proc/PID/smaps.
func (s *sampler) readMappings(b *breakdown) error {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", s.pid))
	if err != nil {
		return err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", s.pid))
	if err != nil {
		return err
	}
	defer f.Close()
	var into *float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 0:
		case strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			// A mapping's header: address range, perms, offset, dev, inode, path.
			into = &b.anon
			if len(fields) >= 6 && fields[4] != "0" {
				path := fields[5]
				switch {
				case path == exe:
					into = &b.binary
				case strings.HasSuffix(path, "/member/snap/db"):
					into = &b.db
					if st, err := os.Stat(path); err == nil {
						b.dbSize = float64(st.Size()) / (1 << 20)
					}
				default:
					into = &b.file
				}
			}
		case fields[0] == "Rss:" && into != nil && len(fields) >= 2:
			kib, _ := strconv.ParseFloat(fields[1], 64)
			*into += kib / 1024
		}
	}
	return sc.Err()
}

// printBreakdown prints b, and its growth since before per ConfigMap created.
func printBreakdown(phase string, b, before breakdown, creates int64) {
	fmt.Printf("RESULT memory_mib phase=%s live_heap=%.1f free_in_spans=%.1f stacks=%.1f runtime_other=%.1f anon_rss=%.1f file_binary=%.1f file_db=%.1f (db file %.1f) file_other=%.1f\n",
		phase, b.live, b.freeInSpans(), b.stacks, b.runtime, b.anon, b.binary, b.db, b.dbSize, b.file)
	if creates <= 0 {
		return
	}
	kib := func(after, before float64) float64 { return (after - before) * 1024 / float64(creates) }
	fmt.Printf("RESULT memory_kib_per_configmap live_heap=%.2f free_in_spans=%.2f stacks_and_runtime=%.2f anon_rss=%.2f file_db=%.2f file_binary=%.2f\n",
		kib(b.live, before.live), kib(b.freeInSpans(), before.freeInSpans()),
		kib(b.stacks+b.runtime, before.stacks+before.runtime), kib(b.anon, before.anon),
		kib(b.db, before.db), kib(b.binary, before.binary))
}
