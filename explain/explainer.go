package explain

import (
	"context"
	"fmt"
)

// Explainer adds the live steps (DNS asked of the cluster DNS, node agents
// asked whether an endpoint's port listens, each node's proxy state) on
// top of CheckService. Its zero value is not usable; build it with New.
type Explainer struct {
	cfg Config
}

// Config is what an Explainer needs to reach the cluster.
type Config struct{}

// New returns an Explainer using cfg.
func New(cfg Config) *Explainer { return &Explainer{cfg: cfg} }

// Explain diagnoses target ("svc/NAME", "pod/NAME", "ingress/NAME",
// "IP:PORT" or "HOST") in namespace and returns the report. An error means
// the diagnosis itself could not run (the API did not answer); a broken
// target is a report whose Status is broken.
func (e *Explainer) Explain(ctx context.Context, namespace, target string) (*Report, error) {
	return nil, fmt.Errorf("explain %s: not implemented", target)
}
