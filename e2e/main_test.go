package e2e

import (
	"os"
	"testing"

	"portal.dev/portal/e2e/framework"
)

func TestMain(m *testing.M) {
	code := m.Run()
	framework.Cleanup()
	os.Exit(code)
}
