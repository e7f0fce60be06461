package printers

import (
	"context"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// testNow is the pinned clock every test measures ages against.
var testNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func pinClock(t *testing.T) {
	t.Helper()
	saved := now
	now = func() time.Time { return testNow }
	t.Cleanup(func() { now = saved })
}

// ago returns the metav1.Time d before testNow.
func ago(d time.Duration) metav1.Time { return metav1.NewTime(testNow.Add(-d)) }

// objectMeta names an object created d before testNow.
func objectMeta(name string, d time.Duration) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: ago(d)}
}

func gr(group, resource string) schema.GroupResource {
	return schema.GroupResource{Group: group, Resource: resource}
}

func convert(t *testing.T, res schema.GroupResource, obj runtime.Object, opts runtime.Object) *metav1.Table {
	t.Helper()
	table, err := TableConvertor(res).ConvertToTable(context.Background(), obj, opts)
	if err != nil {
		t.Fatalf("ConvertToTable(%s, %T): %v", res, obj, err)
	}
	return table
}

// rowCells converts a single object and returns its only row's cells.
func rowCells(t *testing.T, res schema.GroupResource, obj runtime.Object) []any {
	t.Helper()
	table := convert(t, res, obj, nil)
	if len(table.Rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(table.Rows))
	}
	if got := len(table.Rows[0].Cells); got != len(table.ColumnDefinitions) {
		t.Fatalf("got %d cells for %d columns", got, len(table.ColumnDefinitions))
	}
	return table.Rows[0].Cells
}

type rowCase struct {
	name string
	obj  runtime.Object
	want []any
}

func runRowCases(t *testing.T, res schema.GroupResource, cases []rowCase) {
	t.Helper()
	pinClock(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := rowCells(t, res, tc.obj); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got cells %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestColumns(t *testing.T) {
	pinClock(t)
	cases := []struct {
		name     string
		res      schema.GroupResource
		obj      runtime.Object
		columns  []string
		wideFrom int // index of the first wide (Priority 1) column; -1 if none
	}{
		{"namespace", gr("", "namespaces"), &corev1.Namespace{}, []string{"Name", "Status", "Age"}, -1},
		{"node", gr("", "nodes"), &corev1.Node{}, []string{"Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"}, 5},
		{"pod", gr("", "pods"), &corev1.Pod{}, []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"}, 5},
		{"service", gr("", "services"), &corev1.Service{}, []string{"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"}, 6},
		{"endpoints", gr("", "endpoints"), &corev1.Endpoints{}, []string{"Name", "Endpoints", "Age"}, -1},
		{"secret", gr("", "secrets"), &corev1.Secret{}, []string{"Name", "Type", "Data", "Age"}, -1},
		{"configmap", gr("", "configmaps"), &corev1.ConfigMap{}, []string{"Name", "Data", "Age"}, -1},
		{"serviceaccount", gr("", "serviceaccounts"), &corev1.ServiceAccount{}, []string{"Name", "Secrets", "Age"}, -1},
		{"endpointslice", gr("discovery.k8s.io", "endpointslices"), &discoveryv1.EndpointSlice{}, []string{"Name", "AddressType", "Ports", "Endpoints", "Age"}, -1},
		{"lease", gr("coordination.k8s.io", "leases"), &coordinationv1.Lease{}, []string{"Name", "Holder", "Age"}, -1},
		{"ingress", gr("networking.k8s.io", "ingresses"), &networkingv1.Ingress{}, []string{"Name", "Class", "Hosts", "Address", "Ports", "Age"}, -1},
		{"ingressclass", gr("networking.k8s.io", "ingressclasses"), &networkingv1.IngressClass{}, []string{"Name", "Controller", "Parameters", "Age"}, -1},
		{"deployment", gr("apps", "deployments"), &appsv1.Deployment{}, []string{"Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"}, 5},
		{"replicaset", gr("apps", "replicasets"), &appsv1.ReplicaSet{}, []string{"Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"}, 5},
		{"statefulset", gr("apps", "statefulsets"), &appsv1.StatefulSet{}, []string{"Name", "Ready", "Age", "Containers", "Images"}, 3},
		{"daemonset", gr("apps", "daemonsets"), &appsv1.DaemonSet{}, []string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers", "Images", "Selector"}, 8},
		{"controllerrevision", gr("apps", "controllerrevisions"), &appsv1.ControllerRevision{}, []string{"Name", "Controller", "Revision", "Age"}, -1},
		{"unknown resource falls back to name and age", gr("batch", "jobs"), &corev1.Pod{}, []string{"Name", "Age"}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			table := convert(t, tc.res, tc.obj, nil)
			var names []string
			for i, c := range table.ColumnDefinitions {
				names = append(names, c.Name)
				wantPriority := int32(0)
				if tc.wideFrom >= 0 && i >= tc.wideFrom {
					wantPriority = 1
				}
				if c.Priority != wantPriority {
					t.Errorf("column %q: got priority %d, want %d", c.Name, c.Priority, wantPriority)
				}
				if c.Description == "" {
					t.Errorf("column %q: got empty description, want one", c.Name)
				}
			}
			if !reflect.DeepEqual(names, tc.columns) {
				t.Errorf("got columns %q, want %q", names, tc.columns)
			}
			if got := table.ColumnDefinitions[0].Format; got != "name" {
				t.Errorf("got format %q for the first column, want %q", got, "name")
			}
		})
	}
}

func TestEventColumns(t *testing.T) {
	table := convert(t, gr("", "events"), &corev1.Event{}, nil)
	type col struct {
		name     string
		priority int32
		format   string
	}
	want := []col{
		{"Last Seen", 0, ""}, {"Type", 0, ""}, {"Reason", 0, ""}, {"Object", 0, ""},
		{"Subobject", 1, ""}, {"Source", 1, ""}, {"Message", 0, ""},
		{"First Seen", 1, ""}, {"Count", 1, ""}, {"Name", 1, "name"},
	}
	var got []col
	for _, c := range table.ColumnDefinitions {
		got = append(got, col{c.Name, c.Priority, c.Format})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got columns %+v, want %+v", got, want)
	}
}

func TestTableShape(t *testing.T) {
	pinClock(t)
	remaining := int64(7)
	list := &corev1.PodList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next-page", RemainingItemCount: &remaining},
		Items: []corev1.Pod{
			{ObjectMeta: objectMeta("a", time.Hour)},
			{ObjectMeta: objectMeta("b", 2*time.Hour)},
		},
	}

	t.Run("list fills rows and list metadata", func(t *testing.T) {
		table := convert(t, gr("", "pods"), list, &metav1.TableOptions{})
		if len(table.Rows) != 2 {
			t.Fatalf("got %d rows, want 2", len(table.Rows))
		}
		for i, row := range table.Rows {
			if row.Object.Object != &list.Items[i] {
				t.Errorf("row %d: got object %p, want the list item %p", i, row.Object.Object, &list.Items[i])
			}
		}
		if got := table.Rows[1].Cells[0]; got != "b" {
			t.Errorf("got second row name %v, want b", got)
		}
		if table.ResourceVersion != "42" || table.Continue != "next-page" {
			t.Errorf("got resourceVersion %q continue %q, want 42 and next-page", table.ResourceVersion, table.Continue)
		}
		if table.RemainingItemCount == nil || *table.RemainingItemCount != 7 {
			t.Errorf("got remainingItemCount %v, want 7", table.RemainingItemCount)
		}
	})

	t.Run("single object takes its resource version", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: objectMeta("a", time.Hour)}
		pod.ResourceVersion = "9"
		table := convert(t, gr("", "pods"), pod, nil)
		if len(table.Rows) != 1 || table.Rows[0].Object.Object != pod {
			t.Fatalf("got rows %+v, want one row holding the pod", table.Rows)
		}
		if table.ResourceVersion != "9" {
			t.Errorf("got resourceVersion %q, want 9", table.ResourceVersion)
		}
	})

	t.Run("empty list has empty rows", func(t *testing.T) {
		table := convert(t, gr("", "services"), &corev1.ServiceList{}, nil)
		if table.Rows == nil || len(table.Rows) != 0 {
			t.Errorf("got rows %#v, want an empty non-nil slice", table.Rows)
		}
	})

	t.Run("noHeaders drops column definitions", func(t *testing.T) {
		table := convert(t, gr("", "pods"), list, &metav1.TableOptions{NoHeaders: true})
		if table.ColumnDefinitions != nil {
			t.Errorf("got %d columns, want none", len(table.ColumnDefinitions))
		}
		if len(table.Rows) != 2 {
			t.Errorf("got %d rows, want 2", len(table.Rows))
		}
	})

	t.Run("fallback list", func(t *testing.T) {
		table := convert(t, gr("batch", "jobs"), list, nil)
		want := [][]any{{"a", "60m"}, {"b", "120m"}}
		var got [][]any
		for _, r := range table.Rows {
			got = append(got, r.Cells)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got rows %v, want %v", got, want)
		}
	})
}

func TestConvertErrors(t *testing.T) {
	cases := []struct {
		name string
		res  schema.GroupResource
		obj  runtime.Object
		opts runtime.Object
	}{
		{"object of another kind", gr("", "services"), &corev1.Pod{}, nil},
		{"list of another kind", gr("", "services"), &corev1.PodList{Items: []corev1.Pod{{}}}, nil},
		{"unrecognized table options", gr("", "pods"), &corev1.Pod{}, &metav1.ListOptions{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := TableConvertor(tc.res).ConvertToTable(context.Background(), tc.obj, tc.opts)
			if err == nil {
				t.Errorf("got no error, want one")
			}
		})
	}
}

func TestAge(t *testing.T) {
	pinClock(t)
	cases := []struct {
		name string
		t    metav1.Time
		want string
	}{
		{"unset", metav1.Time{}, "<unknown>"},
		{"seconds", ago(90 * time.Second), "90s"},
		{"minutes and seconds", ago(5*time.Minute + 3*time.Second), "5m3s"},
		{"hours", ago(30 * time.Hour), "30h"},
		{"days", ago(3*24*time.Hour + 4*time.Hour), "3d4h"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := age(tc.t); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
