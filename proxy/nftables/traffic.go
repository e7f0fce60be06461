//go:build linux

package nftables

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	"portal.dev/portal/proxy/status"
)

// Traffic reads the counters of every family's table: per Service port,
// the connections its chains sent to an endpoint and those its refuse
// chain rejected (see choose and port). It lists each table once, with
// nft's terse JSON (rules, no map elements), and only when asked: reading
// counters costs the syncs nothing. Safe to call while a sync runs.
func (p *Proxier) Traffic(ctx context.Context) (status.Traffic, error) {
	var t status.Traffic
	for _, fp := range p.set.Families {
		list := p.listTable
		if list == nil {
			list = listTableJSON
		}
		out, err := list(ctx, fp.b.ip)
		if err != nil {
			return status.Traffic{}, err
		}
		if err := addTraffic(&t, out); err != nil {
			return status.Traffic{}, fmt.Errorf("read the %s portal table's counters: %w", fp.b.ip, err)
		}
	}
	return t, nil
}

// listTableJSON returns `nft --json --terse list table FAMILY portal`.
func listTableJSON(ctx context.Context, family string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "nft", "--json", "--terse", "list", "table", family, tableName)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("list the %s portal table: %w: %s", family, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// nftListing is the part of nft's JSON listing addTraffic reads.
type nftListing struct {
	Nftables []struct {
		Rule *struct {
			Chain string                       `json:"chain"`
			Expr  []map[string]json.RawMessage `json:"expr"`
		} `json:"rule"`
	} `json:"nftables"`
}

// addTraffic adds to t the counters of the per-Service chains in one
// table's JSON listing.
func addTraffic(t *status.Traffic, listing []byte) error {
	var l nftListing
	if err := json.Unmarshal(listing, &l); err != nil {
		return err
	}
	for _, o := range l.Nftables {
		if o.Rule == nil {
			continue
		}
		key, port, refused, ok := countedChain(o.Rule.Chain)
		if !ok {
			continue
		}
		for _, e := range o.Rule.Expr {
			raw, ok := e["counter"]
			if !ok {
				continue
			}
			var c struct {
				Packets uint64 `json:"packets"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				return fmt.Errorf("chain %s: counter: %w", o.Rule.Chain, err)
			}
			counts := status.Counts{Connections: c.Packets}
			if refused {
				counts = status.Counts{Refused: c.Packets}
			}
			t.AddPort(key, port, counts)
		}
	}
	return nil
}

// countedChain parses the name of a chain that counts a Service port's
// traffic, "KIND-namespace/name/protocol/port": the Service's
// "namespace/name", the port's "protocol/port", and whether it counts
// refusals. Affinity group chains ("…/g0") count nothing.
func countedChain(name string) (key, port string, refused, ok bool) {
	var rest string
	switch {
	case strings.HasPrefix(name, refusePrefix):
		rest, refused = name[len(refusePrefix):], true
	case strings.HasPrefix(name, "service-"), strings.HasPrefix(name, "cluster-"), strings.HasPrefix(name, "external-"):
		_, rest, _ = strings.Cut(name, "-")
	default:
		return "", "", false, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 {
		return "", "", false, false
	}
	return parts[0] + "/" + parts[1], parts[2] + "/" + parts[3], refused, true
}
