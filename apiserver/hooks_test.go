package apiserver

import (
	"context"
	"errors"
	"testing"

	genericapiserver "k8s.io/apiserver/pkg/server"
)

// A post-start hook's error is fatal to the process, so one that the
// server's own stop caused must not be returned; any other must.
func TestUnlessStopped(t *testing.T) {
	errWait := errors.New("wait: context canceled")
	hook := unlessStopped(func(genericapiserver.PostStartHookContext) error { return errWait })

	if err := hook(genericapiserver.PostStartHookContext{Context: context.Background()}); !errors.Is(err, errWait) {
		t.Errorf("server running: got %v, want the hook's error", err)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if err := hook(genericapiserver.PostStartHookContext{Context: stopped}); err != nil {
		t.Errorf("server stopping: got %v, want nil", err)
	}
}
