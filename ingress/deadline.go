package ingress

import "time"

// maxDeadlineSlack bounds how much later than asked a deadline may fall,
// as nginx leaves a timer in place when it would move by less than 300
// ms (NGX_TIMER_LAZY_DELAY).
const maxDeadlineSlack = 300 * time.Millisecond

// nextDeadline says which deadline an operation that may take d from now
// needs, given at, the one set on the connection (zero for none): at
// itself, unchanged, while it leaves the operation the whole of d and no
// more than the slack beyond, else a new one, the slack beyond now+d,
// which the next operations of a busy connection keep. An at set for a
// longer timeout (an Ingress of its own on a pooled connection) is
// replaced. Moving a connection's deadline changes a runtime timer; for
// a keep-alive connection serving hundreds of requests a second, that
// was one of the larger costs of a request.
func nextDeadline(at, now time.Time, d time.Duration) (time.Time, bool) {
	want := now.Add(d)
	slack := min(d/8, maxDeadlineSlack)
	if !at.IsZero() && !at.Before(want) && !at.After(want.Add(slack)) {
		return at, false
	}
	return want.Add(slack), true
}
