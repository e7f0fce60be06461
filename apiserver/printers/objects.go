package printers

import (
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var namespacePrinter = printer[*corev1.Namespace]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Status", "string", "The status of the namespace"),
		ageColumn,
	},
	cells: func(ns *corev1.Namespace) []any {
		return []any{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp)}
	},
}

var secretPrinter = printer[*corev1.Secret]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Type", "string", corev1.Secret{}.SwaggerDoc()["type"]),
		column("Data", "string", corev1.Secret{}.SwaggerDoc()["data"]),
		ageColumn,
	},
	cells: func(s *corev1.Secret) []any {
		return []any{s.Name, string(s.Type), int64(len(s.Data)), age(s.CreationTimestamp)}
	},
}

var configMapPrinter = printer[*corev1.ConfigMap]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Data", "string", corev1.ConfigMap{}.SwaggerDoc()["data"]),
		ageColumn,
	},
	cells: func(cm *corev1.ConfigMap) []any {
		return []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp)}
	},
}

var serviceAccountPrinter = printer[*corev1.ServiceAccount]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Secrets", "string", corev1.ServiceAccount{}.SwaggerDoc()["secrets"]),
		ageColumn,
	},
	cells: func(sa *corev1.ServiceAccount) []any {
		return []any{sa.Name, int64(len(sa.Secrets)), age(sa.CreationTimestamp)}
	},
}

var leasePrinter = printer[*coordinationv1.Lease]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Holder", "string", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]),
		ageColumn,
	},
	cells: func(l *coordinationv1.Lease) []any {
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		return []any{l.Name, holder, age(l.CreationTimestamp)}
	},
}

// eventPrinter leads with when an event was last seen rather than its name,
// which upstream shows only as the last wide column.
var eventPrinter = printer[*corev1.Event]{
	columns: []metav1.TableColumnDefinition{
		column("Last Seen", "string", corev1.Event{}.SwaggerDoc()["lastTimestamp"]),
		column("Type", "string", corev1.Event{}.SwaggerDoc()["type"]),
		column("Reason", "string", corev1.Event{}.SwaggerDoc()["reason"]),
		column("Object", "string", corev1.Event{}.SwaggerDoc()["involvedObject"]),
		wideColumn("Subobject", "string", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
		wideColumn("Source", "string", corev1.Event{}.SwaggerDoc()["source"]),
		column("Message", "string", corev1.Event{}.SwaggerDoc()["message"]),
		wideColumn("First Seen", "string", corev1.Event{}.SwaggerDoc()["firstTimestamp"]),
		wideColumn("Count", "string", corev1.Event{}.SwaggerDoc()["count"]),
		{Name: "Name", Type: "string", Format: "name", Priority: 1, Description: objectMetaDoc["name"]},
	},
	cells: eventCells,
}

// eventCells reads both event styles: the old one with first/last timestamps
// and a count, and the events.k8s.io one with an event time and a series.
func eventCells(e *corev1.Event) []any {
	firstSeen := age(e.FirstTimestamp)
	if e.FirstTimestamp.IsZero() {
		firstSeen = microAge(e.EventTime)
	}
	lastSeen := age(e.LastTimestamp)
	if e.LastTimestamp.IsZero() {
		lastSeen = firstSeen
	}
	count := e.Count
	if e.Series != nil {
		lastSeen = microAge(e.Series.LastObservedTime)
		count = e.Series.Count
	} else if count == 0 {
		// New-style singleton events leave the count unset.
		count = 1
	}

	object := strings.ToLower(e.InvolvedObject.Kind)
	if e.InvolvedObject.Name != "" {
		object += "/" + e.InvolvedObject.Name
	}
	return []any{
		lastSeen,
		e.Type,
		e.Reason,
		object,
		e.InvolvedObject.FieldPath,
		eventSource(e),
		strings.TrimSpace(e.Message),
		firstSeen,
		int64(count),
		e.Name,
	}
}

// eventSource renders "component, host", falling back to the reporting
// controller and instance that new-style events set instead.
func eventSource(e *corev1.Event) string {
	component := e.Source.Component
	if component == "" {
		component = e.ReportingController
	}
	host := e.Source.Host
	if host == "" {
		host = e.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}
