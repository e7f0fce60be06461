//go:build !linux

package userspace

import "testing"

// setConnectedHook is Linux's: elsewhere there is no event loop.
func setConnectedHook(t *testing.T, fn func(endpoint string)) { t.Fatal("no event loop off Linux") }
