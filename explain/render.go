package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteText prints r for a person: the target and its verdict, then one
// line per step in path order with its evidence indented below. Every
// string in a Report is already escaped (see clean), so nothing a pod
// wrote can drive the terminal.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", r.Target, strings.ToUpper(string(r.Status)))
	width := 0
	for _, s := range r.Steps {
		width = max(width, len(s.Name))
	}
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "  %-7s  %-*s  %s\n", s.Status, width, clean(s.Name), clean(s.Message))
		for _, ev := range s.Evidence {
			fmt.Fprintf(&b, "  %-7s  %-*s    %s\n", "", width, "", clean(ev))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes r as indented JSON, for scripts.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}
