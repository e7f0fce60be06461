package embeddedetcd

import "fmt"

// InUseError says that another process runs on the data directory: two
// servers on one etcd directory would corrupt it, and the checks of
// check.go would take the other's locks for damage.
type InUseError struct {
	// DataDir is the --data-dir another process holds.
	DataDir string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("data directory %s is in use by another process (it holds the lock on the directory); "+
		"stop that process or give this one another --data-dir", e.DataDir)
}
