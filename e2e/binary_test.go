package e2e

import (
	"debug/elf"
	"os"
	"os/exec"
	"testing"
	"time"

	"portal.dev/portal/e2e/framework"
)

// The binary every test runs comes from hack/build.sh. Built without its
// tags, the linker keeps and exports every symbol (for Go plugins that
// kubectl's kustomize could load): a much larger binary, and more of it
// mapped by every Portal process.
func TestBinaryExportsNoGoSymbols(t *testing.T) {
	f, err := elf.Open(framework.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil && err != elf.ErrNoSymbols {
		t.Fatal(err)
	}
	if len(syms) > 1000 {
		t.Errorf("bin/portal exports %d dynamic symbols; it should export only its C library imports (build with hack/build.sh)", len(syms))
	}
}

// The userspace proxy is the one mode that runs off Linux (issue 7), so the
// one binary must build there: Linux-only code (the node agent, the kernel
// proxy modes, knftables and the nftables library under it) stays behind
// build tags. A new import of one of them from code every OS builds breaks
// this test, with the compiler's words.
func TestBinaryBuildsOffLinux(t *testing.T) {
	if testing.Short() {
		// hack/test.sh does not pass -short: CI runs this.
		t.Skip("cross-compiles the binary for other systems: minutes with a cold build cache")
	}
	for _, target := range []struct{ goos, goarch string }{
		{"darwin", "arm64"},
		{"windows", "amd64"},
	} {
		t.Run(target.goos+"/"+target.goarch, func(t *testing.T) {
			// Through hack/build.sh, as the shipped binary is built; cgo
			// off, as for any cross build without a C toolchain.
			cmd := exec.Command("../hack/build.sh", os.DevNull)
			cmd.Env = append(os.Environ(), "GOOS="+target.goos, "GOARCH="+target.goarch, "CGO_ENABLED=0")
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("GOOS=%s GOARCH=%s CGO_ENABLED=0 hack/build.sh: %v\n%s", target.goos, target.goarch, err, out)
			}
			t.Logf("built in %s", time.Since(start).Round(time.Millisecond))
		})
	}
}
