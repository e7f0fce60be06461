package allocator

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Errors the allocator returns, compared with errors.Is. Their texts are
// upstream's allocators', since the API server passes them on to clients.
var (
	// ErrAllocated refuses a requested cluster IP another Service holds.
	ErrAllocated = errors.New("provided IP is already allocated")
	// ErrPortAllocated refuses a requested node port another Service holds.
	ErrPortAllocated = errors.New("provided port is already allocated")
	// ErrFull says a range has nothing left to hand out.
	ErrFull = errors.New("range is full")
	// ErrNotInRange matches every *IPRangeError and *PortRangeError.
	ErrNotInRange = errors.New("not in the valid range")
	// ErrNoRange says a Service needs a cluster IP of a family the cluster
	// has no range for.
	ErrNoRange = errors.New("no service range configured")
	// ErrCollided says picks kept colliding with other API servers'; the
	// client may try again.
	ErrCollided = errors.New("allocation kept colliding; try again")
)

// IPRangeError refuses a requested cluster IP that the range of its family
// never hands out (or a family the cluster has no range for, when
// ValidRange is empty). Its text is upstream's ipallocator.ErrNotInRange.
type IPRangeError struct {
	IP         netip.Addr
	ValidRange string
}

// Error returns upstream's message.
func (e *IPRangeError) Error() string {
	return fmt.Sprintf("the provided IP (%v) is not in the valid range. The range of valid IPs is %s", e.IP, e.ValidRange)
}

// Is makes errors.Is(err, ErrNotInRange) hold.
func (e *IPRangeError) Is(target error) bool { return target == ErrNotInRange }

// PortRangeError refuses a requested node port outside the NodePort range.
// Its text is upstream's portallocator.ErrNotInRange.
type PortRangeError struct {
	ValidPorts string
}

// Error returns upstream's message.
func (e *PortRangeError) Error() string {
	return fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %s", e.ValidPorts)
}

// Is makes errors.Is(err, ErrNotInRange) hold.
func (e *PortRangeError) Is(target error) bool { return target == ErrNotInRange }

// FullError says the range a Service field takes its value from has
// nothing left: the cluster IPs of a family, or the node ports. It names
// the field, so that the API server can report it there.
type FullError struct {
	Field Field
	// Index is the entry of spec.clusterIPs or spec.ports that needed
	// a value.
	Index int
}

// Error returns upstream's allocators' text.
func (e *FullError) Error() string { return ErrFull.Error() }

// Is makes errors.Is(err, ErrFull) hold.
func (e *FullError) Is(target error) bool { return target == ErrFull }

// noRangeError names the family ErrNoRange is about.
type noRangeError struct{ family corev1.IPFamily }

func (e noRangeError) Error() string        { return fmt.Sprintf("no %s service range configured", e.family) }
func (e noRangeError) Is(target error) bool { return target == ErrNoRange }

// Field says which field of a Service asked for a value.
type Field int

const (
	// FieldClusterIP is spec.clusterIPs[Index].
	FieldClusterIP Field = iota
	// FieldNodePort is spec.ports[Index].nodePort.
	FieldNodePort
	// FieldHealthCheckNodePort is spec.healthCheckNodePort.
	FieldHealthCheckNodePort
)

// RequestError refuses one value a Service asked for by name. The API
// server turns it into a field error on the field it came from.
type RequestError struct {
	Field Field
	// Index is the entry of spec.clusterIPs or spec.ports that asked.
	Index int
	// IP is the requested cluster IP as written; Port the requested port.
	IP   string
	Port int32
	// Err is ErrAllocated, ErrPortAllocated, *IPRangeError or
	// *PortRangeError.
	Err error
}

// Error names the value and why it was refused.
func (e *RequestError) Error() string {
	if e.Field == FieldClusterIP {
		return fmt.Sprintf("cluster IP %s: %v", e.IP, e.Err)
	}
	return fmt.Sprintf("node port %d: %v", e.Port, e.Err)
}

// Unwrap returns the reason.
func (e *RequestError) Unwrap() error { return e.Err }

// RequestErrors are all the refusals of one Allocate call, in the order of
// the Service's fields.
type RequestErrors []*RequestError

// Error lists the refusals.
func (e RequestErrors) Error() string {
	msgs := make([]string, len(e))
	for i, r := range e {
		msgs[i] = r.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns the refusals, so errors.Is and errors.As see each.
func (e RequestErrors) Unwrap() []error {
	errs := make([]error, len(e))
	for i, r := range e {
		errs[i] = r
	}
	return errs
}
