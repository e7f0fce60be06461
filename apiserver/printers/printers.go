// Package printers owns the server-side table output (metav1.Table) that
// `kubectl get` renders for the resources Portal serves. It reproduces the
// columns and cell formatting of upstream kube-apiserver's printers for the
// k8s.io/api types Portal stores, and falls back to NAME and AGE for anything
// else.
//
// It is pure: objects in, tables out. It must not talk to storage, clients or
// the network; the only outside input is the clock, held in a package variable
// so tests can pin it.
package printers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"
)

// now is the clock every AGE-like cell is measured against. Tests replace it.
var now = time.Now

// TableConvertor returns the rest.TableConvertor for a resource, keyed by its
// plural name and group, e.g. {Resource: "services"} or
// {Group: "discovery.k8s.io", Resource: "endpointslices"}. Resources without a
// printer of their own get NAME and AGE columns.
func TableConvertor(groupResource schema.GroupResource) rest.TableConvertor {
	if c, ok := convertors[groupResource]; ok {
		return c
	}
	return fallback
}

// convertors maps each resource with upstream-specific columns to its printer.
var convertors = map[schema.GroupResource]rest.TableConvertor{
	{Resource: "namespaces"}:      namespacePrinter,
	{Resource: "nodes"}:           nodePrinter,
	{Resource: "pods"}:            podPrinter,
	{Resource: "services"}:        servicePrinter,
	{Resource: "endpoints"}:       endpointsPrinter,
	{Resource: "secrets"}:         secretPrinter,
	{Resource: "configmaps"}:      configMapPrinter,
	{Resource: "events"}:          eventPrinter,
	{Resource: "serviceaccounts"}: serviceAccountPrinter,

	{Group: "discovery.k8s.io", Resource: "endpointslices"}:  endpointSlicePrinter,
	{Group: "coordination.k8s.io", Resource: "leases"}:       leasePrinter,
	{Group: "networking.k8s.io", Resource: "ingresses"}:      ingressPrinter,
	{Group: "networking.k8s.io", Resource: "ingressclasses"}: ingressClassPrinter,

	{Group: "apps", Resource: "deployments"}:         deploymentPrinter,
	{Group: "apps", Resource: "replicasets"}:         replicaSetPrinter,
	{Group: "apps", Resource: "statefulsets"}:        statefulSetPrinter,
	{Group: "apps", Resource: "daemonsets"}:          daemonSetPrinter,
	{Group: "apps", Resource: "controllerrevisions"}: controllerRevisionPrinter,

	{Group: "rbac.authorization.k8s.io", Resource: "roles"}:               rolePrinter,
	{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}:        clusterRolePrinter,
	{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}:        roleBindingPrinter,
	{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}: clusterRoleBindingPrinter,
}

// fallback prints any object with metadata as NAME and AGE. The apiserver's
// own default prints "Created At" timestamps instead, which kubectl users
// are not used to seeing for built-in kinds.
var fallback = printer[metav1.Object]{
	columns: []metav1.TableColumnDefinition{nameColumn, ageColumn},
	cells: func(m metav1.Object) []any {
		return []any{m.GetName(), age(m.GetCreationTimestamp())}
	},
}

// printer converts objects of type T, or lists of them, to a Table.
type printer[T any] struct {
	// columns are all columns, wide ones (Priority 1) included: like upstream,
	// the server always prints wide and the client drops what it doesn't show.
	columns []metav1.TableColumnDefinition
	// cells returns one cell per column, in column order.
	cells func(T) []any
	// conditions optionally marks a row, e.g. a pod that has completed.
	conditions func(T) []metav1.TableRowCondition
}

// ConvertToTable implements rest.TableConvertor for a single object or a list.
func (p printer[T]) ConvertToTable(_ context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	omitHeaders, err := noHeaders(tableOptions)
	if err != nil {
		return nil, err
	}
	table := &metav1.Table{}
	addRow := func(o runtime.Object) error {
		item, ok := o.(T)
		if !ok {
			return fmt.Errorf("convert %T to table: not the type this resource prints", o)
		}
		row := metav1.TableRow{Cells: p.cells(item), Object: runtime.RawExtension{Object: o}}
		if p.conditions != nil {
			row.Conditions = p.conditions(item)
		}
		table.Rows = append(table.Rows, row)
		return nil
	}
	if meta.IsListType(obj) {
		// Lists with no items still get an empty, non-nil row slice, as upstream.
		table.Rows = []metav1.TableRow{}
		err = meta.EachListItem(obj, addRow)
	} else {
		err = addRow(obj)
	}
	if err != nil {
		return nil, err
	}

	if l, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = l.GetResourceVersion()
		table.Continue = l.GetContinue()
		table.RemainingItemCount = l.GetRemainingItemCount()
	} else if c, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = c.GetResourceVersion()
	}
	if !omitHeaders {
		table.ColumnDefinitions = p.columns
	}
	return table, nil
}

// noHeaders reports whether the client asked for rows without column
// definitions; like upstream, options of any other type are an error.
func noHeaders(tableOptions runtime.Object) (bool, error) {
	switch o := tableOptions.(type) {
	case nil:
		return false, nil
	case *metav1.TableOptions:
		return o != nil && o.NoHeaders, nil
	default:
		return false, fmt.Errorf("unrecognized type %T for table options, can't display tabular output", tableOptions)
	}
}

// age renders the time since t the way kubectl does ("5m", "3d4h"), or
// "<unknown>" for an unset time.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}

// microAge is age for the MicroTime fields of events.
func microAge(t metav1.MicroTime) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}

var objectMetaDoc = metav1.ObjectMeta{}.SwaggerDoc()

// nameColumn and ageColumn open and close most tables.
var (
	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]}
	ageColumn  = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc["creationTimestamp"]}
)

// column defines a column shown by plain `kubectl get`.
func column(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: description}
}

// wideColumn defines a column shown only by `kubectl get -o wide`.
func wideColumn(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Priority: 1, Description: description}
}

// noneIfEmpty returns s, or "<none>" when s is empty.
func noneIfEmpty(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
