//go:build !unix

package embeddedetcd

import "os"

// lockDataDir does not lock the data directory where flock is missing: a
// second server there finds etcd's own database lock held, which the
// checks report as damage.
func lockDataDir(dataDir string) (*os.File, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	return os.Open(dataDir)
}
