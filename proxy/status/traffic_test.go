package status

import (
	"reflect"
	"testing"
)

func TestSum(t *testing.T) {
	node := func(name string, ports map[string]map[string]Counts) Traffic {
		var tr Traffic
		tr.Node = name
		for key, ps := range ports {
			for port, c := range ps {
				tr.AddPort(key, port, c)
			}
		}
		return tr
	}
	tests := []struct {
		name  string
		nodes []Traffic
		want  map[string]Counts
	}{
		{"no node counted", nil, map[string]Counts{}},
		{
			name: "ports and nodes add up",
			nodes: []Traffic{
				node("n1", map[string]map[string]Counts{
					"ns/a": {"tcp/80": {Connections: 5}, "tcp/443": {Connections: 2, Refused: 1}},
					"ns/b": {"udp/53": {Refused: 4}},
				}),
				node("n2", map[string]map[string]Counts{"ns/a": {"tcp/80": {Connections: 3}}}),
			},
			want: map[string]Counts{"ns/a": {Connections: 10, Refused: 1}, "ns/b": {Refused: 4}},
		},
		{
			name:  "a Service counted as zero stays, one never counted is absent",
			nodes: []Traffic{node("n1", map[string]map[string]Counts{"ns/idle": {"tcp/80": {}}})},
			want:  map[string]Counts{"ns/idle": {}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sum(tc.nodes); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
