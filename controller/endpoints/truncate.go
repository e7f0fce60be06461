package endpoints

import corev1 "k8s.io/api/core/v1"

// MaxCapacity is the most addresses (ready and not ready together) one
// Endpoints object holds; beyond it the controller truncates and sets the
// endpoints.kubernetes.io/over-capacity annotation, as upstream does.
const MaxCapacity = 1000

// overCapacityTruncated is the value of the over-capacity annotation.
const overCapacityTruncated = "truncated"

// Truncate cuts subsets down to at most limit addresses and reports whether
// it had to. Ready addresses are kept first: if they alone exceed limit, all
// not-ready addresses go and the ready ones are cut; otherwise only
// not-ready addresses are cut. The cut is spread over the subsets in
// proportion to their size, each share rounded up, so the earlier subsets
// may keep slightly more (upstream's rule). Subsets left without addresses
// are dropped. The input is not modified.
func Truncate(subsets []corev1.EndpointSubset, limit int) ([]corev1.EndpointSubset, bool) {
	ready, notReady := countAddresses(subsets)
	if ready+notReady <= limit {
		return subsets, false
	}
	out := make([]corev1.EndpointSubset, 0, len(subsets))
	if ready > limit {
		shares := proportional(sizes(subsets, true), limit)
		for i, s := range subsets {
			s.Addresses, s.NotReadyAddresses = s.Addresses[:shares[i]:shares[i]], nil
			out = appendNonEmpty(out, s)
		}
		return out, true
	}
	shares := proportional(sizes(subsets, false), limit-ready)
	for i, s := range subsets {
		s.NotReadyAddresses = s.NotReadyAddresses[:shares[i]:shares[i]]
		out = appendNonEmpty(out, s)
	}
	return out, true
}

func countAddresses(subsets []corev1.EndpointSubset) (ready, notReady int) {
	for _, s := range subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	return ready, notReady
}

func sizes(subsets []corev1.EndpointSubset, ready bool) []int {
	n := make([]int, len(subsets))
	for i, s := range subsets {
		if ready {
			n[i] = len(s.Addresses)
		} else {
			n[i] = len(s.NotReadyAddresses)
		}
	}
	return n
}

// proportional splits budget over groups of the given sizes: each group
// gets its share of budget rounded up, until the budget runs out.
func proportional(sizes []int, budget int) []int {
	total := 0
	for _, n := range sizes {
		total += n
	}
	shares := make([]int, len(sizes))
	left := budget
	for i, n := range sizes {
		if total == 0 {
			break
		}
		share := min((n*budget+total-1)/total, left, n)
		shares[i] = share
		left -= share
	}
	return shares
}

func appendNonEmpty(out []corev1.EndpointSubset, s corev1.EndpointSubset) []corev1.EndpointSubset {
	if len(s.Addresses) == 0 {
		s.Addresses = nil
	}
	if len(s.NotReadyAddresses) == 0 {
		s.NotReadyAddresses = nil
	}
	if s.Addresses == nil && s.NotReadyAddresses == nil {
		return out
	}
	return append(out, s)
}
