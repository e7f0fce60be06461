//go:build unix

package embeddedetcd

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDataDir takes an exclusive flock on the data directory itself and
// returns the open directory that holds it; closing it (or the process
// ending, however it ends) releases the lock. A lock held elsewhere is an
// InUseError at once, not a wait.
func lockDataDir(dataDir string) (*os.File, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	d, err := os.Open(dataDir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &InUseError{DataDir: dataDir}
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dataDir, err)
	}
	return d, nil
}
