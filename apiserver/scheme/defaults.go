package scheme

import "k8s.io/apimachinery/pkg/runtime"

// addDefaulters registers the static defaulting of each served type. The
// decoder runs it on every object it reads, from a request or from storage.
func addDefaulters(s *runtime.Scheme) {
}
