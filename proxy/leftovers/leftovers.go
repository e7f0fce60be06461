// Package leftovers removes what Portal's proxy modes leave in the kernel,
// so switching modes (or `portal proxy --cleanup`) leaves no stale rules:
// the nftables mode's "portal" tables, and the iptables mode's chains,
// all named PORTAL-*, in the nat and filter tables, and the userspace
// mode's portal-vip link. It only deletes those names; every other table,
// chain, rule and link is left alone.
//
// The nftables part (nftables_linux.go) builds on Linux only: knftables
// does not build elsewhere, and no other system has the tables. The rest
// builds everywhere, as the userspace mode does.
package leftovers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// NFTablesTable is the table the nftables mode owns in families ip and ip6.
const NFTablesTable = "portal"

// ChainPrefix starts the name of every iptables chain the iptables mode owns.
const ChainPrefix = "PORTAL-"

// Runner runs a command with stdin and returns its standard output.
type Runner func(ctx context.Context, name string, args []string, stdin string) (string, error)

// ExecRunner runs commands with os/exec.
func ExecRunner(ctx context.Context, name string, args []string, stdin string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// DeleteIPTables removes the PORTAL-* chains, and the rules that jump to
// them, from the nat and filter tables of iptables and ip6tables (nft
// backend, which the iptables mode uses). Binaries that are not
// installed are skipped: then there is nothing of ours to remove.
func DeleteIPTables(ctx context.Context, run Runner) error {
	if run == nil {
		run = ExecRunner
	}
	var errs []error
	for _, tool := range []string{"iptables-nft", "ip6tables-nft"} {
		if _, err := exec.LookPath(tool + "-save"); err != nil {
			continue
		}
		for _, table := range []string{"nat", "filter"} {
			save, err := run(ctx, tool+"-save", []string{"-t", table}, "")
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, script := range RestoreScripts(table, save) {
				if _, err := run(ctx, tool+"-restore", []string{"--noflush"}, script); err != nil {
					errs = append(errs, err)
					break
				}
			}
		}
	}
	return errors.Join(errs...)
}

// MaxChainsPerRestore bounds the chains one iptables-restore input
// flushes or deletes: iptables-nft-restore (1.8.9) spends time quadratic
// in the chains of one input, and the iptables mode owns about eleven
// chains per Service.
const MaxChainsPerRestore = 2000

// RestoreScripts returns the iptables-restore --noflush inputs, to run in
// order, that remove the PORTAL-* chains of one table from its
// iptables-save output: delete the jumps to them from other chains, flush
// them all (they may jump to each other), then delete them. It returns
// nil when there are none.
func RestoreScripts(table, save string) []string {
	var chains, jumps []string
	sc := bufio.NewScanner(strings.NewReader(save))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	inTable := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			inTable = line[1:] == table
		case !inTable:
		case strings.HasPrefix(line, ":"+ChainPrefix):
			name, _, _ := strings.Cut(line[1:], " ")
			chains = append(chains, name)
		case strings.HasPrefix(line, "-A "):
			fields := strings.Fields(line)
			if len(fields) > 1 && strings.HasPrefix(fields[1], ChainPrefix) {
				continue // goes away with its chain
			}
			if jumpsToPortal(fields) {
				jumps = append(jumps, "-D"+line[2:])
			}
		}
	}
	if len(chains) == 0 && len(jumps) == 0 {
		return nil
	}
	var scripts []string
	var b strings.Builder
	n := 0
	flush := func() {
		if b.Len() > 0 {
			scripts = append(scripts, "*"+table+"\n"+b.String()+"COMMIT\n")
			b.Reset()
			n = 0
		}
	}
	// Jumps first, so no packet enters a chain while it is taken apart.
	for _, j := range jumps {
		b.WriteString(j + "\n")
	}
	for _, op := range []string{"-F ", "-X "} {
		for _, c := range chains {
			if n == MaxChainsPerRestore {
				flush()
			}
			b.WriteString(op + c + "\n")
			n++
		}
		// Past one input, every flush must be done before the first
		// delete: a chain still jumped to cannot be deleted.
		if len(chains) > MaxChainsPerRestore {
			flush()
		}
	}
	flush()
	return scripts
}

func jumpsToPortal(fields []string) bool {
	for i, f := range fields {
		if (f == "-j" || f == "-g" || f == "--jump" || f == "--goto") && i+1 < len(fields) && strings.HasPrefix(fields[i+1], ChainPrefix) {
			return true
		}
	}
	return false
}

// VIPLink is the link the userspace mode puts Service addresses on.
const VIPLink = "portal-vip"

// DeleteVIPLink removes the userspace mode's VIP link, if there is one;
// without the ip command there is none of ours.
func DeleteVIPLink(ctx context.Context, run Runner) error {
	if run == nil {
		run = ExecRunner
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil
	}
	if _, err := run(ctx, "ip", []string{"link", "show", VIPLink}, ""); err != nil {
		return nil // not there
	}
	if _, err := run(ctx, "ip", []string{"link", "del", VIPLink}, ""); err != nil {
		return fmt.Errorf("delete link %s: %w", VIPLink, err)
	}
	return nil
}
