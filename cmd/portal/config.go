package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// defaultServerConfig is the file `portal server` reads when it exists and
// --config is not given, as k3s reads /etc/rancher/k3s/config.yaml.
const defaultServerConfig = "/etc/portal/config.yaml"

// configFormatAnnotation, on a command's --config flag, says how the file
// reads: configFlagNames or configKubeProxy.
const configFormatAnnotation = "portal.dev/config-format"

const (
	// configFlagNames is a YAML mapping whose keys are the command's flag
	// names, as k3s's config.yaml.
	configFlagNames = "flag-names"
	// configKubeProxy is kube-proxy's KubeProxyConfiguration.
	configKubeProxy = "kube-proxy"
)

// addConfigFlags gives the commands that run components a --config flag.
// The proxy's file is kube-proxy's, so a kube-proxy configuration serves
// it unchanged; the others take their own flag names as keys.
func addConfigFlags(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "server":
			addConfigFlag(c, configFlagNames, defaultServerConfig)
		case "apiserver", "controller-manager", "dns", "agent", "ingress":
			addConfigFlag(c, configFlagNames, "")
		case "proxy":
			addConfigFlag(c, configKubeProxy, "")
		}
	}
}

// addConfigFlag adds --config to cmd; applyConfigFile reads it. A
// defaultPath is read only when the file exists.
func addConfigFlag(cmd *cobra.Command, format, defaultPath string) {
	usage := "YAML file of flag values, the flag names as keys (data-dir: /var/lib/portal; a list for a flag that takes several: disable: [proxy, dns]); flags on the command line override it"
	if format == configKubeProxy {
		usage = "kube-proxy's configuration file (apiVersion kubeproxy.config.k8s.io/v1alpha1, kind KubeProxyConfiguration); fields Portal does not support are refused by name; flags on the command line override it"
	}
	if defaultPath != "" {
		usage += "; the default is read only when it exists"
	}
	cmd.Flags().String("config", defaultPath, usage)
	cmd.Flags().SetAnnotation("config", configFormatAnnotation, []string{format})
}

// applyConfigFile sets, from the file named by cmd's --config, every flag
// not given on the command line: flags on the command line win, as with
// k3s and kubelet. It runs after flag parsing and before the command, and
// does nothing for a command without --config.
func applyConfigFile(cmd *cobra.Command) error {
	flags := cmd.Flags()
	f := flags.Lookup("config")
	if f == nil || len(f.Annotations[configFormatAnnotation]) == 0 || f.Value.String() == "" {
		return nil
	}
	path := f.Value.String()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !f.Changed {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var settings []flagSetting
	if f.Annotations[configFormatAnnotation][0] == configKubeProxy {
		settings, err = kubeProxySettings(data, flags)
	} else {
		settings, err = flagFileSettings(data, flags, cmd.CommandPath())
	}
	if err == nil {
		err = applySettings(flags, settings)
	}
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// flagSetting is a value for a flag from a config file.
type flagSetting struct {
	key   string // what the file calls it, for errors
	flag  string
	value string
}

// applySettings sets each flag not given on the command line, marking it
// given, so that defaults that depend on whether a flag was given (as the
// proxy's --min-sync-period) see the file's value as given.
func applySettings(flags *pflag.FlagSet, settings []flagSetting) error {
	for _, s := range settings {
		if flags.Lookup(s.flag).Changed {
			continue
		}
		if err := flags.Set(s.flag, s.value); err != nil {
			return fmt.Errorf("%s: %w", s.key, err)
		}
	}
	return nil
}

// flagFileSettings reads a YAML mapping of flag names to values. A list
// or a mapping (key: value) gives a flag that takes several values its
// comma-separated form.
func flagFileSettings(data []byte, flags *pflag.FlagSet, command string) ([]flagSetting, error) {
	top, err := decodeYAML(data)
	if err != nil {
		return nil, err
	}
	if top == nil {
		return nil, nil // an empty file
	}
	m, ok := top.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a mapping of flag names to values")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []flagSetting
	for _, k := range keys {
		f := flags.Lookup(k)
		switch {
		case k == "config":
			return nil, fmt.Errorf("key %q: a config file cannot name another", k)
		case f == nil:
			return nil, fmt.Errorf("unknown key %q: %s has no --%s flag", k, command, k)
		}
		v, err := flagValue(m[k])
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		out = append(out, flagSetting{key: fmt.Sprintf("key %q", k), flag: f.Name, value: v})
	}
	return out, nil
}

// decodeYAML decodes YAML into JSON's types, numbers kept as written;
// a key given twice is an error.
func decodeYAML(data []byte) (any, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// flagValue is the command-line form of a YAML value.
func flagValue(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", fmt.Errorf("no value (write \"\" for an empty one)")
	case []any:
		items := make([]string, len(v))
		for i, item := range v {
			s, err := scalar(item)
			if err != nil {
				return "", fmt.Errorf("item %d: %w", i+1, err)
			}
			items[i] = s
		}
		return joinCSV(items), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		items := make([]string, len(keys))
		for i, k := range keys {
			s, err := scalar(v[k])
			if err != nil {
				return "", fmt.Errorf("%s: %w", k, err)
			}
			items[i] = k + "=" + s
		}
		return joinCSV(items), nil
	}
	return scalar(v)
}

func scalar(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	case nil:
		return "", fmt.Errorf("no value")
	}
	return "", fmt.Errorf("want a string, number or boolean, got %T", v)
}

// joinCSV joins items with commas, quoting those with a comma or a quote
// in them, as pflag's string lists read their values.
func joinCSV(items []string) string {
	var b strings.Builder
	w := csv.NewWriter(&b)
	w.Write(items)
	w.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}
