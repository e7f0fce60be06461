package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// parseWithConfig parses args as the subcommand's flags and applies its
// --config file, as the root command does before running it.
func parseWithConfig(t *testing.T, args ...string) (*cobra.Command, error) {
	t.Helper()
	cmd, rest, err := newRootCommand().Find(args)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatal(err)
	}
	return cmd, applyConfigFile(cmd)
}

// writeFile writes content into a file of a fresh directory.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The server's config file has the flag names as keys, as k3s's
// config.yaml; flags on the command line win.
func TestServerConfigFile(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		args    []string
		want    map[string]string // flag: value
		wantErr string
	}{
		{name: "sets a flag", file: "data-dir: /srv/portal\n", want: map[string]string{"data-dir": "/srv/portal"}},
		{name: "command line overrides it", file: "data-dir: /srv/portal\nsecure-port: 7443\n", args: []string{"--data-dir", "/tmp/x"},
			want: map[string]string{"data-dir": "/tmp/x", "secure-port": "7443"}},
		{name: "list for a repeated flag", file: "disable: [proxy, dns]\n", want: map[string]string{"disable": "[proxy,dns]"}},
		{name: "comma form of a list", file: "disable: proxy,dns\n", want: map[string]string{"disable": "[proxy,dns]"}},
		{name: "numbers, booleans and durations", file: "secure-port: 7443\nmasquerade-all: true\nsync-period: 10s\nkube-api-qps: 7.5\n",
			want: map[string]string{"secure-port": "7443", "masquerade-all": "true", "sync-period": "10s", "kube-api-qps": "7.5"}},
		{name: "mapping for a map flag", file: "node-labels: {zone: a, rack: \"7\"}\n", want: map[string]string{"node-labels": "rack=7,zone=a"}},
		{name: "empty file", file: "", want: map[string]string{"data-dir": defaultDataDirForTest()}},
		{name: "unknown key", file: "data-dir: /x\nno-such-flag: 1\n", wantErr: `unknown key "no-such-flag": portal server has no --no-such-flag flag`},
		{name: "bad value names the key", file: "secure-port: https\n", wantErr: `key "secure-port": invalid argument "https" for "--secure-port" flag`},
		{name: "no value", file: "data-dir:\n", wantErr: `key "data-dir": no value`},
		{name: "key twice", file: "data-dir: /a\ndata-dir: /b\n", wantErr: `"data-dir" already set in map`},
		{name: "not a mapping", file: "- data-dir\n", wantErr: "want a mapping of flag names to values"},
		{name: "config in config", file: "config: /etc/other.yaml\n", wantErr: `key "config": a config file cannot name another`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.file)
			cmd, err := parseWithConfig(t, append([]string{"server", "--config", path}, tt.args...)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("error %q does not name the file %s", err, path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for flag, want := range tt.want {
				got := cmd.Flags().Lookup(flag).Value.String()
				if flag == "node-labels" {
					got = sortedItems(got) // a map flag prints its entries in map order
				}
				if got != want {
					t.Errorf("--%s = %q, want %q", flag, got, want)
				}
			}
		})
	}
}

// sortedItems sorts the items of a comma-separated list.
func sortedItems(list string) string {
	items := strings.Split(list, ",")
	slices.Sort(items)
	return strings.Join(items, ",")
}

// defaultDataDirForTest is --data-dir's default, which an empty file
// leaves alone.
func defaultDataDirForTest() string {
	cmd, _, _ := newRootCommand().Find([]string{"server"})
	return cmd.Flags().Lookup("data-dir").DefValue
}

// A value the file sets counts as given: defaults that depend on whether
// a flag was given (the proxy's --min-sync-period follows the mode unless
// given) keep the file's value.
func TestConfigFileValueCountsAsGiven(t *testing.T) {
	cmd, err := parseWithConfig(t, "server", "--config", writeFile(t, "min-sync-period: 3s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cmd.Flags().Changed("min-sync-period") {
		t.Errorf("--min-sync-period from the file does not count as given")
	}
}

// The default path is read when it exists and skipped when it does not;
// a --config that does not exist is an error.
func TestConfigFileDefaultPath(t *testing.T) {
	dir := t.TempDir()
	def := filepath.Join(dir, "config.yaml")
	newCmd := func() *cobra.Command {
		var dataDir string
		c := &cobra.Command{Use: "server"}
		c.Flags().StringVar(&dataDir, "data-dir", "/var/lib/portal", "")
		addConfigFlag(c, configFlagNames, def)
		return c
	}
	run := func(args ...string) (string, error) {
		c := newCmd()
		if err := c.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		err := applyConfigFile(c)
		return c.Flags().Lookup("data-dir").Value.String(), err
	}
	if got, err := run(); err != nil || got != "/var/lib/portal" {
		t.Errorf("no default file: got %q, %v; want the flag's default, no error", got, err)
	}
	if err := os.WriteFile(def, []byte("data-dir: /srv\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := run(); err != nil || got != "/srv" {
		t.Errorf("default file: got %q, %v; want /srv, no error", got, err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	if _, err := run("--config", missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing --config: got error %v, want one naming %s", err, missing)
	}
	if got, err := run("--config", ""); err != nil || got != "/var/lib/portal" {
		t.Errorf("--config \"\": got %q, %v; want no file read", got, err)
	}
}

// --help says where the server's default config file is.
func TestServerHelpNamesDefaultConfig(t *testing.T) {
	cmd, _, _ := newRootCommand().Find([]string{"server"})
	if usage := cmd.Flags().FlagUsages(); !strings.Contains(usage, defaultServerConfig) {
		t.Errorf("portal server --help does not name %s:\n%s", defaultServerConfig, usage)
	}
}

// Every command that runs a component takes --config; the root command
// reads it before the command runs, so a bad file stops it there.
func TestConfigFileRefusedBeforeRun(t *testing.T) {
	bad := writeFile(t, "no-such-flag: 1\n")
	for _, name := range []string{"server", "apiserver", "controller-manager", "dns", "agent"} {
		t.Run(name, func(t *testing.T) {
			root := newRootCommand()
			root.SetArgs([]string{name, "--config", bad})
			root.SetOut(new(strings.Builder))
			root.SetErr(new(strings.Builder))
			err := root.Execute()
			if want := `unknown key "no-such-flag"`; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("got error %v, want one containing %q", err, want)
			}
		})
	}
}
