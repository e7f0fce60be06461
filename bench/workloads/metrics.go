package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// endpointWork is what the endpoint controllers' metrics count: how often
// each synced a Service and wrote an object. Unlike the CPU figures, the
// counts do not swing with the load of the machine, so they tell whether
// the controllers recompute a Service once per pod change or in batches.
type endpointWork struct {
	sliceSyncs, sliceWrites, endpointsSyncs, endpointsWrites float64
}

// endpointCounters maps the metric names (without labels) to the field
// each adds to; counters with labels (result, operation) are summed.
var endpointCounters = map[string]func(w *endpointWork) *float64{
	"endpoint_slice_controller_syncs":                 func(w *endpointWork) *float64 { return &w.sliceSyncs },
	"endpoint_slice_controller_changes":               func(w *endpointWork) *float64 { return &w.sliceWrites },
	"endpoint_controller_sync_duration_seconds_count": func(w *endpointWork) *float64 { return &w.endpointsSyncs },
	"endpoint_controller_changes_total":               func(w *endpointWork) *float64 { return &w.endpointsWrites },
}

// readEndpointWork reads the counters from the server's /metrics.
func readEndpointWork(ctx context.Context, c kubernetes.Interface) (endpointWork, error) {
	var w endpointWork
	data, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return w, fmt.Errorf("server metrics: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '{'); i >= 0 {
			name = line[:i]
			_, rest, ok = strings.Cut(line, "} ")
		}
		field := endpointCounters[name]
		if field == nil || !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return w, fmt.Errorf("metric line %q: %w", line, err)
		}
		*field(&w) += v
	}
	return w, sc.Err()
}

// reportEndpointWork prints what the endpoint controllers did since before.
func reportEndpointWork(ctx context.Context, c kubernetes.Interface, what string, before endpointWork) {
	after, err := readEndpointWork(ctx, c)
	if err != nil {
		fmt.Println("#", what, err)
		return
	}
	fmt.Printf("RESULT %s endpointslice_syncs=%.0f slice_writes=%.0f endpoints_syncs=%.0f endpoints_writes=%.0f\n", what,
		after.sliceSyncs-before.sliceSyncs, after.sliceWrites-before.sliceWrites,
		after.endpointsSyncs-before.endpointsSyncs, after.endpointsWrites-before.endpointsWrites)
}
