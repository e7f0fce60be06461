package explain

import (
	"slices"
	"strings"
)

// closeNames returns up to n of names closest to name: those within a
// third of its length in edits (at least one), or that contain it or are contained in it,
// nearest first.
func closeNames(name string, names []string, n int) []string {
	type scored struct {
		name string
		d    int
	}
	var out []scored
	limit := max(1, len(name)/3)
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

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours (wbe for
// web) each count one.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
