package auth

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// ErrNotSynced says a mode could not decide because the caches it decides
// from were still being filled. The authorization filter answers it with a
// server error, never a 403: the policy may well allow the request.
var ErrNotSynced = errors.New("authorization caches not synced yet, please try again")

// syncWait bounds how long a request waits for a mode's caches: they fill
// within a second or two of a start; a server whose caches take longer
// cannot reach etcd and answers an error rather than holding requests.
const syncWait = 15 * time.Second

// syncPoll is how often a waiting request looks at the caches again.
const syncPoll = 50 * time.Millisecond

// WaitForSync returns an authorizer that asks a only once every synced
// reports true. A request that comes earlier, as one does right after a restart, waits
// for them (no longer than its context and syncWait), where deciding from
// caches still empty would refuse, with a 403, what the policy allows;
// upstream's authorizers never decide from a cache not yet synced either.
// When the wait ends first, a gives no opinion with ErrNotSynced.
// Builtin comes before the modes in Chain and never waits, so the server's
// own loopback client, which fills the caches, is not held up.
func WaitForSync(a authorizer.Authorizer, synced ...func() bool) authorizer.Authorizer {
	return &syncGate{Authorizer: a, synced: synced}
}

type syncGate struct {
	authorizer.Authorizer
	synced []func() bool
	// done is set once every cache has synced; they stay synced.
	done atomic.Bool
}

// Authorize implements authorizer.Authorizer.
func (g *syncGate) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if err := g.wait(ctx); err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	return g.Authorizer.Authorize(ctx, a)
}

// ConditionsAwareAuthorize implements authorizer.Authorizer.
func (g *syncGate) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	if err := g.wait(ctx); err != nil {
		return authorizer.ConditionsAwareDecisionFromParts(authorizer.DecisionNoOpinion, "", err)
	}
	return g.Authorizer.ConditionsAwareAuthorize(ctx, a)
}

// wait returns once every cache has synced, or ErrNotSynced.
func (g *syncGate) wait(ctx context.Context) error {
	if g.done.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	tick := time.NewTicker(syncPoll)
	defer tick.Stop()
	for {
		if g.allSynced() {
			g.done.Store(true)
			return nil
		}
		select {
		case <-ctx.Done():
			return ErrNotSynced
		case <-tick.C:
		}
	}
}

func (g *syncGate) allSynced() bool {
	for _, s := range g.synced {
		if !s() {
			return false
		}
	}
	return true
}
