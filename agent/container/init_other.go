//go:build !linux

// Package container runs a pod's processes in Linux namespaces; see
// container.go, which builds on Linux only. Elsewhere there is only the
// init helper's entry point, which fails.
package container

import (
	"fmt"
	"runtime"
)

// InitMain fails: the init helper sets up Linux namespaces.
func InitMain([]string) error {
	return fmt.Errorf("the node agent's init helper needs Linux (this is %s)", runtime.GOOS)
}
