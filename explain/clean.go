package explain

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// clean makes text that came from a pod (probe output, container
// messages, labels a user wrote) safe to print: control characters,
// terminal escape sequences and invalid UTF-8 come out escaped (\x1b,
// \n), so nothing a pod writes can move the cursor or recolour the
// screen of the user reading the report.
func clean(s string) string {
	if isClean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r != ' ':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

func isClean(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || (!unicode.IsPrint(r) && r != ' ') {
			return false
		}
	}
	return true
}
