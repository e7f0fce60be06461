package status

// Counts is what a node's proxy counted for one Service port since it
// last wrote that port's rules: the connections it sent to an endpoint
// and those it refused because the port had no endpoint. Counters start
// again from zero when the rules are rewritten, so a reader turns two
// samples into a rate and treats a decrease as a restart.
type Counts struct {
	Connections uint64 `json:"connections"`
	Refused     uint64 `json:"refused"`
}

// Add returns c plus o.
func (c Counts) Add(o Counts) Counts {
	return Counts{Connections: c.Connections + o.Connections, Refused: c.Refused + o.Refused}
}

// Traffic is a node's proxy's counters, the JSON of its /status/traffic.
// A Service is absent when the proxy has no counter for it (not
// programmed, or a mode that does not count), never shown as zero.
type Traffic struct {
	// Node is the proxy's node.
	Node string `json:"node"`
	// Mode is the proxy mode that counted.
	Mode string `json:"mode"`
	// Services maps "namespace/name" to the counts of its ports, by
	// "protocol/port" ("tcp/80").
	Services map[string]map[string]Counts `json:"services"`
}

// AddPort adds c to port of the Service key ("namespace/name").
func (t *Traffic) AddPort(key, port string, c Counts) {
	if t.Services == nil {
		t.Services = map[string]map[string]Counts{}
	}
	ports := t.Services[key]
	if ports == nil {
		ports = map[string]Counts{}
		t.Services[key] = ports
	}
	ports[port] = ports[port].Add(c)
}

// Totals returns each Service's counts summed over its ports.
func (t Traffic) Totals() map[string]Counts {
	out := make(map[string]Counts, len(t.Services))
	for key, ports := range t.Services {
		var sum Counts
		for _, c := range ports {
			sum = sum.Add(c)
		}
		out[key] = sum
	}
	return out
}

// Sum adds up the Services' totals over nodes: a Service appears when at
// least one node counted it.
func Sum(nodes []Traffic) map[string]Counts {
	out := map[string]Counts{}
	for _, t := range nodes {
		for key, c := range t.Totals() {
			out[key] = out[key].Add(c)
		}
	}
	return out
}
