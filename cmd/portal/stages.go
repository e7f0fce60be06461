package main

import (
	"context"
	"errors"
	"sync"
)

// The stages of `portal server`, in the order they stop: the node-side
// components first, while the API they report to still answers (the DNS
// withdraws its endpoint, the agent and proxy finish their writes), then
// the controllers (the leader gives its Lease back), then the API server,
// which closes the embedded etcd once it has stopped serving.
const (
	nodeStage = iota // DNS and its publisher, proxy, agent
	controllerStage
	apiStage
	numStages
)

// stages runs the components of `portal server` and stops them stage by
// stage. Its zero value is not usable; make one with newStages.
type stages struct {
	ctx    [numStages]context.Context
	cancel [numStages]context.CancelFunc
	wg     [numStages]sync.WaitGroup

	failed chan struct{} // closed by the first component that returns early
	once   sync.Once
	mu     sync.Mutex
	err    error // the first error a component returned
}

// newStages returns stages whose contexts carry parent's values but end
// only when stop ends them, so that each stage outlives the one before.
func newStages(parent context.Context) *stages {
	s := &stages{failed: make(chan struct{})}
	base := context.WithoutCancel(parent)
	for i := range s.ctx {
		s.ctx[i], s.cancel[i] = context.WithCancel(base)
	}
	return s
}

// run runs a component in stage. A component that returns before its
// stage is stopped, with an error or without, stops the server; an error
// returned while stopping is kept unless it only says the context ended.
func (s *stages) run(stage int, run func(context.Context) error) {
	ctx := s.ctx[stage]
	s.wg[stage].Go(func() {
		err := run(ctx)
		stopping := ctx.Err() != nil
		if err != nil && !(stopping && errors.Is(err, context.Canceled)) {
			s.setErr(err)
		}
		if !stopping {
			s.once.Do(func() { close(s.failed) })
		}
	})
}

func (s *stages) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// wait returns once ctx ends or a component has returned, after every
// stage has stopped, with the first error a component returned.
func (s *stages) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-s.failed:
	}
	return s.stop()
}

// stop stops the stages in order, each once the one before has finished,
// and returns the first error a component returned.
func (s *stages) stop() error {
	for i := range s.ctx {
		s.cancel[i]()
		s.wg[i].Wait()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
