//go:build !linux

package embeddedetcd

// ReleaseDatabasePages does nothing outside Linux: page-out
// (MADV_PAGEOUT) is Linux's.
func (s *Server) ReleaseDatabasePages() error { return nil }
