package explain

import (
	"slices"
	"strings"
)

// closeNames returns up to n of names closest to name: those within a
// third of its length in edits, or that contain it or are contained in it,
// nearest first.
func closeNames(name string, names []string, n int) []string {
	type scored struct {
		name string
		d    int
	}
	var out []scored
	limit := max(2, len(name)/3)
	for _, c := range names {
		if c == name {
			continue
		}
		d := editDistance(name, c)
		if d <= limit || strings.Contains(c, name) || strings.Contains(name, c) {
			out = append(out, scored{c, d})
		}
	}
	slices.SortFunc(out, func(a, b scored) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.name, b.name)
	})
	var res []string
	for _, s := range out[:min(n, len(out))] {
		res = append(res, s.name)
	}
	return res
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
