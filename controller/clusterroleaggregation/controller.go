// Package clusterroleaggregation fills aggregated ClusterRoles, as
// upstream's clusterrole-aggregation controller does: a ClusterRole with
// an aggregationRule holds the rules of every ClusterRole its selectors
// match. It writes only the rules of aggregated ClusterRoles.
package clusterroleaggregation

import (
	"context"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"portal.dev/portal/internal/loop"
)

// Controller keeps aggregated ClusterRoles' rules up to date.
type Controller struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	roles   rbaclisters.ClusterRoleLister
	loop    *loop.Loop[string]
}

// New returns a controller that writes through client and reads
// ClusterRoles from factory's informer.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	inf := factory.Rbac().V1().ClusterRoles()
	c := &Controller{client: client, factory: factory, roles: inf.Lister()}
	c.loop = loop.New(loop.Config[string]{Name: "clusterrole_aggregation", QueueName: "ClusterRoleAggregator", Sync: c.sync})
	// Any ClusterRole's change may change what an aggregated one gathers
	// (its labels or its rules), so every aggregated one is looked at.
	c.loop.WatchOrLog(inf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueAggregated() },
		UpdateFunc: func(any, any) { c.enqueueAggregated() },
		DeleteFunc: func(any) { c.enqueueAggregated() },
	})
	return c
}

// Run starts the informers not running yet and syncs with workers
// goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	c.loop.Run(ctx, workers)
}

func (c *Controller) enqueueAggregated() {
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		return
	}
	for _, r := range all {
		if r.AggregationRule != nil {
			c.loop.Add(r.Name)
		}
	}
}

func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.roles.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || role.AggregationRule == nil {
		return err
	}
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		return err
	}
	rules, err := Aggregate(role, all)
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(rules, role.Rules) {
		return nil
	}
	updated := role.DeepCopy()
	updated.Rules = rules
	_, err = c.client.RbacV1().ClusterRoles().Update(ctx, updated, metav1.UpdateOptions{})
	return err
}

// Aggregate returns the rules role gathers from all: those of every other
// ClusterRole a selector of its aggregationRule matches, in name order,
// each rule once.
func Aggregate(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	var sels []labels.Selector
	for i := range role.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, err
		}
		sels = append(sels, s)
	}
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b *rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
	rules := []rbacv1.PolicyRule{}
	for _, other := range sorted {
		if other.Name == role.Name || !matchesAny(sels, other.Labels) {
			continue
		}
		for _, r := range other.Rules {
			if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return apiequality.Semantic.DeepEqual(have, r) }) {
				rules = append(rules, r)
			}
		}
	}
	return rules, nil
}

func matchesAny(sels []labels.Selector, l map[string]string) bool {
	for _, s := range sels {
		if s.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}
