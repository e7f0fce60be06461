package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// flagLine is one flag of a help text: "  -o, --output string   usage" or,
// for a flag with no value type, "      --token   usage". pflag pads the
// name and type column with at least two spaces before the usage.
var flagLine = regexp.MustCompile(`^\s+(?:-\w, )?--([\w-]+)(?: (.*?))?(?:\s{2,}|$)`)

// plainType is what a flag's value type should read as in help: one
// word, as pflag prints string, int, duration or strings.
var plainType = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

// oddTypesByDesign are type names other packages chose on purpose.
var oddTypesByDesign = map[string]string{
	"vmodule": "pattern=N,...", // component-base's logging flags
}

// Backticks in a pflag usage string name the flag's type: `portal agent
// --help` printed --kubeconfig's type as "portal kubeconfig --user …".
// Every subcommand's help must show each flag's type as a plain word.
func TestHelpFlagTypes(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.DisableFlagParsing {
				continue
			}
			p := append(append([]string(nil), path...), sub.Name())
			paths = append(paths, p)
			walk(sub, p)
		}
	}
	walk(newRootCommand(), nil)
	for _, path := range paths {
		t.Run(strings.Join(path, " "), func(t *testing.T) {
			root := newRootCommand()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(append(path, "--help"))
			if err := root.Execute(); err != nil {
				t.Fatalf("portal %s --help: %v", strings.Join(path, " "), err)
			}
			flags := 0
			for _, line := range strings.Split(out.String(), "\n") {
				m := flagLine.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				flags++
				name, typ := m[1], m[2]
				if typ == "" || plainType.MatchString(typ) || oddTypesByDesign[name] == typ {
					continue
				}
				t.Errorf("--%s: type shown as %q, want one word\n%s", name, typ, line)
			}
			if flags == 0 {
				t.Errorf("found no flags in the help text:\n%s", out.String())
			}
		})
	}
}
