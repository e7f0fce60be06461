package node

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"portal.dev/portal/apiserver/auth"
)

// Authorizer is the Node authorizer. It allows a node's agent what its node
// needs and has no opinion about everything else, nor about any user that
// is not a node.
type Authorizer struct {
	graph  graph
	rules  []rbacv1.PolicyRule
	synced cache.InformerSynced
}

var (
	_ authorizer.Authorizer   = (*Authorizer)(nil)
	_ authorizer.RuleResolver = (*Authorizer)(nil)
)

// NewAuthorizer returns a Node authorizer fed by the pod informer of f,
// the API server's own informers; the caller starts f. Until the informer
// has synced, the authorizer knows no pods, so nodes may read none of the
// objects pods refer to.
func NewAuthorizer(f informers.SharedInformerFactory) (*Authorizer, error) {
	a := &Authorizer{rules: Rules()}
	inf := f.Core().V1().Pods().Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.podChanged,
		UpdateFunc: func(_, obj any) { a.podChanged(obj) },
		DeleteFunc: a.podDeleted,
	})
	if err != nil {
		return nil, fmt.Errorf("node authorizer: watch pods: %w", err)
	}
	a.synced = reg.HasSynced
	return a, nil
}

// HasSynced reports whether the authorizer has taken in every pod the
// informer listed at its start.
func (a *Authorizer) HasSynced() bool { return a.synced == nil || a.synced() }

func (a *Authorizer) podChanged(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		a.graph.setPod(pod)
	}
}

func (a *Authorizer) podDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		a.graph.deletePod(pod.Namespace, pod.Name)
	}
}

var (
	secrets         = schema.GroupResource{Resource: "secrets"}
	configMaps      = schema.GroupResource{Resource: "configmaps"}
	pvcs            = schema.GroupResource{Resource: "persistentvolumeclaims"}
	serviceAccounts = schema.GroupResource{Resource: "serviceaccounts"}
	pods            = schema.GroupResource{Resource: "pods"}
	leases          = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
)

// Authorize decides a request of a node's agent: reads of the objects its
// pods refer to from the graph, its Lease and its pods by their names,
// everything else by Rules. It never denies, so that another authorizer
// may still allow what it does not.
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	node, ok := auth.NodeName(attrs.GetUser())
	if !ok {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if attrs.IsResourceRequest() {
		switch (schema.GroupResource{Group: attrs.GetAPIGroup(), Resource: attrs.GetResource()}) {
		case secrets:
			return a.authorizeRead(node, secretKind, attrs)
		case configMaps:
			return a.authorizeRead(node, configMapKind, attrs)
		case pvcs:
			return a.authorizeGet(node, pvcKind, attrs)
		case serviceAccounts:
			return a.authorizeCreateToken(node, attrs)
		case leases:
			return a.authorizeLease(node, attrs)
		case pods:
			return a.authorizePod(node, attrs)
		}
	}
	return a.byRules(attrs)
}

// ConditionsAwareAuthorize is Authorize for callers that understand
// conditional decisions; the Node authorizer makes none.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions fails closed: the Node authorizer returns no
// conditions to evaluate.
func (a *Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func (a *Authorizer) byRules(attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if rulesAllow(attrs, a.rules) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// authorizeRead allows get, list and watch of one named object (a list or
// watch names one with a metadata.name field selector) that a pod of node
// refers to.
func (a *Authorizer) authorizeRead(node string, k kind, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	switch attrs.GetVerb() {
	case "get", "list", "watch":
	default:
		return authorizer.DecisionNoOpinion, "can only read resources of this type", nil
	}
	if attrs.GetSubresource() != "" {
		return authorizer.DecisionNoOpinion, "cannot read subresource", nil
	}
	if attrs.GetNamespace() == "" {
		return authorizer.DecisionNoOpinion, "can only read namespaced object of this type", nil
	}
	return a.related(node, k, attrs)
}

// authorizeGet allows get of one object that a pod of node refers to.
func (a *Authorizer) authorizeGet(node string, k kind, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.GetVerb() != "get" {
		return authorizer.DecisionNoOpinion, "can only get individual resources of this type", nil
	}
	if attrs.GetSubresource() != "" {
		return authorizer.DecisionNoOpinion, "cannot get subresource", nil
	}
	return a.related(node, k, attrs)
}

// authorizeCreateToken allows a token for a ServiceAccount that a pod of
// node runs as. NodeRestriction, as upstream's, is where a token's binding
// to a pod of the node would be checked.
func (a *Authorizer) authorizeCreateToken(node string, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.GetVerb() != "create" || attrs.GetName() == "" {
		return authorizer.DecisionNoOpinion, "can only create tokens for individual service accounts", nil
	}
	if attrs.GetSubresource() != "token" {
		return authorizer.DecisionNoOpinion, "can only create token subresource of serviceaccount", nil
	}
	return a.related(node, serviceAccountKind, attrs)
}

func (a *Authorizer) related(node string, k kind, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.GetName() == "" {
		return authorizer.DecisionNoOpinion, "No Object name found", nil
	}
	if !a.graph.related(node, ref{kind: k, namespace: attrs.GetNamespace(), name: attrs.GetName()}) {
		return authorizer.DecisionNoOpinion, noRelationship(node), nil
	}
	return authorizer.DecisionAllow, "", nil
}

func noRelationship(node string) string {
	return fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

// authorizeLease allows the node's own Lease in kube-node-lease, with the
// verbs of Rules. A create names no object to check here; NodeRestriction
// refuses one for another node's name.
func (a *Authorizer) authorizeLease(node string, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.GetNamespace() != corev1.NamespaceNodeLease {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease), nil
	}
	if attrs.GetVerb() != "create" && attrs.GetName() != node {
		return authorizer.DecisionNoOpinion, "can only access node lease with the same name as the requesting node", nil
	}
	return a.byRules(attrs)
}

// authorizePod allows a node to read the pods bound to it: get by name,
// list and watch only with the field selector spec.nodeName=NODE (as the
// agent's informer asks) or for one pod of the node by name. Writes go by
// Rules; NodeRestriction limits them to the node's pods.
func (a *Authorizer) authorizePod(node string, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.GetSubresource() != "" {
		return a.byRules(attrs)
	}
	switch attrs.GetVerb() {
	case "get":
		return a.podByName(node, attrs)
	case "list", "watch":
		reqs, _ := attrs.GetFieldSelector()
		for _, r := range reqs {
			if r.Field == "spec.nodeName" && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) && r.Value == node {
				return a.byRules(attrs)
			}
		}
		if attrs.GetName() != "" {
			return a.podByName(node, attrs)
		}
		return authorizer.DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector", nil
	}
	return a.byRules(attrs)
}

func (a *Authorizer) podByName(node string, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.GetName() == "" {
		return authorizer.DecisionNoOpinion, "No Object name found", nil
	}
	if !a.graph.podOnNode(node, attrs.GetNamespace(), attrs.GetName()) {
		return authorizer.DecisionNoOpinion, noRelationship(node), nil
	}
	return a.byRules(attrs)
}

// RulesFor lists what a node may do everywhere, the static rules, and says
// the list is incomplete: what the graph allows depends on the object.
// For other users it has nothing to say.
func (a *Authorizer) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	if _, ok := auth.NodeName(u); !ok {
		return nil, nil, false, nil
	}
	var out []authorizer.ResourceRuleInfo
	for _, r := range a.rules {
		out = append(out, &authorizer.DefaultResourceRuleInfo{Verbs: r.Verbs, APIGroups: r.APIGroups,
			Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	return out, nil, true, nil
}

// rulesAllow reports whether one of rules allows the request attrs
// describes, matching verbs, API groups, resources ("pods/status" for a
// subresource), resource names and non-resource URLs as RBAC does.
func rulesAllow(attrs authorizer.Attributes, rules []rbacv1.PolicyRule) bool {
	for i := range rules {
		if ruleAllows(attrs, &rules[i]) {
			return true
		}
	}
	return false
}

func ruleAllows(attrs authorizer.Attributes, r *rbacv1.PolicyRule) bool {
	if !matches(r.Verbs, attrs.GetVerb()) {
		return false
	}
	if !attrs.IsResourceRequest() {
		return matches(r.NonResourceURLs, attrs.GetPath())
	}
	resource := attrs.GetResource()
	if sub := attrs.GetSubresource(); sub != "" {
		resource += "/" + sub
	}
	return matches(r.APIGroups, attrs.GetAPIGroup()) && matches(r.Resources, resource) &&
		(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, attrs.GetName()))
}

func matches(list []string, s string) bool {
	return slices.Contains(list, s) || slices.Contains(list, "*")
}
