// Package version says which Portal this is and which Kubernetes API it
// speaks.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"

	apimachineryversion "k8s.io/apimachinery/pkg/version"

	baseversion "k8s.io/component-base/version"
)

// Version is Portal's version; release builds set it with
// -ldflags "-X portal.dev/portal/version.Version=v1.2.3".
var Version = "dev"

// Kubernetes is the Kubernetes minor version whose API Portal serves.
var Kubernetes = "v" + baseversion.DefaultKubeBinaryVersion

// Commit is the VCS revision the binary was built from, when known.
func Commit() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// KubernetesGitVersion is the full Kubernetes version of the API libraries
// Portal is built from, e.g. "v1.37.2", read from the build's k8s.io/api.
func KubernetesGitVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "k8s.io/api" && strings.HasPrefix(d.Version, "v0.") {
				return "v1." + strings.TrimPrefix(d.Version, "v0.")
			}
		}
	}
	return Kubernetes + ".0"
}

// Info is what GET /version returns: the Kubernetes version, with Portal's
// own version as build metadata (as k3s reports "v1.30.2+k3s1").
func Info() apimachineryversion.Info {
	git := KubernetesGitVersion()
	major, minor, _ := strings.Cut(strings.TrimPrefix(git, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	return apimachineryversion.Info{
		Major:        major,
		Minor:        minor,
		GitVersion:   git + "+portal-" + Version,
		GitCommit:    Commit(),
		GitTreeState: "clean",
		BuildDate:    "1970-01-01T00:00:00Z",
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
	}
}
