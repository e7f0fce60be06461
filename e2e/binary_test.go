package e2e

import (
	"debug/elf"
	"testing"

	"portal.dev/portal/e2e/framework"
)

// The binary every test runs comes from hack/build.sh. Built without its
// tags, the linker keeps and exports every symbol (for Go plugins that
// kubectl's kustomize could load): 40 MB more binary, and more of it mapped
// by every Portal process.
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
