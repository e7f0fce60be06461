// Package conntrack deletes the UDP conntrack entries that would keep a
// flow pinned to where a Service no longer sends it. UDP has no
// handshake, so a client that keeps sending from one port keeps its entry
// alive forever: to an endpoint that is gone (kubernetes issues 19029,
// 59368, 139628), or, when the first packets came before any endpoint, to
// nowhere (48370). The decisions are pure functions of snapshots; the
// kernel sits behind Interface. It only ever deletes entries whose
// original destination is a Service frontend; it must not touch rules or
// any other entry.
package conntrack

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"portal.dev/portal/proxy/snapshot"
)

// Filter selects conntrack entries; zero fields match anything.
type Filter struct {
	Family       snapshot.Family
	Protocol     v1.Protocol
	OrigDst      netip.Addr
	OrigDstPort  uint16
	ReplySrc     netip.Addr
	ReplySrcPort uint16
}

// String renders f in conntrack's own flag names, for logs and tests.
func (f Filter) String() string {
	parts := []string{strings.ToLower(string(f.Protocol))}
	if f.OrigDst.IsValid() {
		parts = append(parts, "orig-dst="+f.OrigDst.String())
	}
	if f.OrigDstPort != 0 {
		parts = append(parts, "orig-port-dst="+strconv.Itoa(int(f.OrigDstPort)))
	}
	if f.ReplySrc.IsValid() {
		parts = append(parts, "reply-src="+f.ReplySrc.String())
	}
	if f.ReplySrcPort != 0 {
		parts = append(parts, "reply-port-src="+strconv.Itoa(int(f.ReplySrcPort)))
	}
	return strings.Join(parts, " ")
}

// Entry is one conntrack entry: its original and reply tuples.
type Entry struct {
	Protocol     v1.Protocol
	OrigSrc      netip.Addr
	OrigDst      netip.Addr
	OrigSrcPort  uint16
	OrigDstPort  uint16
	ReplySrc     netip.Addr
	ReplySrcPort uint16
}

// Interface is the kernel's conntrack table.
type Interface interface {
	// List returns the entries of one family and protocol.
	List(ctx context.Context, family snapshot.Family, proto v1.Protocol) ([]Entry, error)
	// Delete deletes the entries f selects and says how many there were.
	Delete(ctx context.Context, f Filter) (int, error)
}

// Exec is Interface over the conntrack binary (conntrack-tools).
type Exec struct {
	// Path is the binary; "" means "conntrack" on $PATH.
	Path string
}

var _ Interface = Exec{}

func (e Exec) path() string {
	if e.Path == "" {
		return "conntrack"
	}
	return e.Path
}

func familyFlag(f snapshot.Family) string {
	if f == v1.IPv6Protocol {
		return "ipv6"
	}
	return "ipv4"
}

// List runs conntrack -L.
func (e Exec) List(ctx context.Context, family snapshot.Family, proto v1.Protocol) ([]Entry, error) {
	cmd := exec.CommandContext(ctx, e.path(), "-L", "-f", familyFlag(family), "-p", strings.ToLower(string(proto)))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("conntrack -L: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return ParseList(string(out), proto), nil
}

var deletedRE = regexp.MustCompile(`(\d+) flow entries have been deleted`)

// Delete runs conntrack -D. conntrack exits 1 when nothing matched,
// which is not an error here.
func (e Exec) Delete(ctx context.Context, f Filter) (int, error) {
	args := []string{"-D", "-f", familyFlag(f.Family), "-p", strings.ToLower(string(f.Protocol))}
	if f.OrigDst.IsValid() {
		args = append(args, "--orig-dst", f.OrigDst.String())
	}
	if f.OrigDstPort != 0 {
		args = append(args, "--orig-port-dst", strconv.Itoa(int(f.OrigDstPort)))
	}
	if f.ReplySrc.IsValid() {
		args = append(args, "--reply-src", f.ReplySrc.String())
	}
	if f.ReplySrcPort != 0 {
		args = append(args, "--reply-port-src", strconv.Itoa(int(f.ReplySrcPort)))
	}
	cmd := exec.CommandContext(ctx, e.path(), args...)
	var stderr strings.Builder
	cmd.Stdout = nil
	cmd.Stderr = &stderr
	err := cmd.Run()
	if m := deletedRE.FindStringSubmatch(stderr.String()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n, nil
	}
	if err != nil {
		return 0, fmt.Errorf("conntrack %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return 0, nil
}

// ParseList parses conntrack -L output lines such as
//
//	udp      17 29 src=10.0.0.2 dst=10.96.0.10 sport=5353 dport=53 [UNREPLIED] src=10.244.1.5 dst=10.0.0.2 sport=53 dport=5353 mark=0 use=1
//
// The first src/dst/sport/dport are the original tuple, the second the reply.
func ParseList(out string, proto v1.Protocol) []Entry {
	var entries []Entry
	for _, line := range strings.Split(out, "\n") {
		var e Entry
		var n [2]int // occurrences seen of src and sport
		var dn [2]int
		ok := false
		for _, field := range strings.Fields(line) {
			k, v, found := strings.Cut(field, "=")
			if !found {
				continue
			}
			switch k {
			case "src":
				a, err := netip.ParseAddr(v)
				if err != nil {
					break
				}
				if n[0] == 0 {
					e.OrigSrc = a
				} else if n[0] == 1 {
					e.ReplySrc = a
					ok = true
				}
				n[0]++
			case "dst":
				if a, err := netip.ParseAddr(v); err == nil && dn[0] == 0 {
					e.OrigDst = a
				}
				dn[0]++
			case "sport":
				p, _ := strconv.ParseUint(v, 10, 16)
				if n[1] == 0 {
					e.OrigSrcPort = uint16(p)
				} else if n[1] == 1 {
					e.ReplySrcPort = uint16(p)
				}
				n[1]++
			case "dport":
				p, _ := strconv.ParseUint(v, 10, 16)
				if dn[1] == 0 {
					e.OrigDstPort = uint16(p)
				}
				dn[1]++
			}
		}
		if ok && e.OrigDst.IsValid() {
			e.Protocol = proto
			entries = append(entries, e)
		}
	}
	return entries
}
