package printers

import (
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSimpleRows(t *testing.T) {
	pinClock(t)
	cases := []struct {
		rowCase
		resource string
		group    string
	}{
		{resource: "namespaces", rowCase: rowCase{
			name: "active namespace",
			obj:  &corev1.Namespace{ObjectMeta: objectMeta("default", 40*24*time.Hour), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			want: []any{"default", "Active", "40d"},
		}},
		{resource: "namespaces", rowCase: rowCase{
			name: "terminating namespace",
			obj:  &corev1.Namespace{ObjectMeta: objectMeta("old", time.Hour), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			want: []any{"old", "Terminating", "60m"},
		}},
		{resource: "secrets", rowCase: rowCase{
			name: "tls secret",
			obj: &corev1.Secret{
				ObjectMeta: objectMeta("cert", time.Hour),
				Type:       corev1.SecretTypeTLS,
				Data:       map[string][]byte{"tls.crt": nil, "tls.key": nil},
			},
			want: []any{"cert", "kubernetes.io/tls", int64(2), "60m"},
		}},
		{resource: "configmaps", rowCase: rowCase{
			name: "data and binary data both count",
			obj: &corev1.ConfigMap{
				ObjectMeta: objectMeta("kube-root-ca.crt", time.Hour),
				Data:       map[string]string{"ca.crt": "..."},
				BinaryData: map[string][]byte{"blob": nil},
			},
			want: []any{"kube-root-ca.crt", int64(2), "60m"},
		}},
		{resource: "serviceaccounts", rowCase: rowCase{
			name: "service account without secrets",
			obj:  &corev1.ServiceAccount{ObjectMeta: objectMeta("default", time.Hour)},
			want: []any{"default", int64(0), "60m"},
		}},
		{group: "coordination.k8s.io", resource: "leases", rowCase: rowCase{
			name: "held lease",
			obj: &coordinationv1.Lease{
				ObjectMeta: objectMeta("node-1", time.Hour),
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("node-1")},
			},
			want: []any{"node-1", "node-1", "60m"},
		}},
		{group: "coordination.k8s.io", resource: "leases", rowCase: rowCase{
			name: "unheld lease",
			obj:  &coordinationv1.Lease{ObjectMeta: objectMeta("free", time.Hour)},
			want: []any{"free", "", "60m"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.resource+"/"+tc.name, func(t *testing.T) {
			if got := rowCells(t, gr(tc.group, tc.resource), tc.obj); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got cells %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestEventRows(t *testing.T) {
	cases := []rowCase{
		{
			name: "core event with timestamps and count",
			obj: &corev1.Event{
				ObjectMeta:     objectMeta("web.17a", time.Hour),
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{app}"},
				Reason:         "BackOff",
				Message:        "Back-off restarting failed container\n",
				Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
				FirstTimestamp: ago(20 * time.Minute),
				LastTimestamp:  ago(30 * time.Second),
				Count:          12,
				Type:           corev1.EventTypeWarning,
			},
			want: []any{"30s", "Warning", "BackOff", "pod/web", "spec.containers{app}", "kubelet, node-1", "Back-off restarting failed container", "20m", int64(12), "web.17a"},
		},
		{
			name: "events.k8s.io singleton",
			obj: &corev1.Event{
				ObjectMeta:          objectMeta("node-1.17b", time.Hour),
				InvolvedObject:      corev1.ObjectReference{Kind: "Node", Name: "node-1"},
				Reason:              "RegisteredNode",
				Message:             "Registered Node node-1",
				EventTime:           metav1.NewMicroTime(testNow.Add(-5 * time.Minute)),
				ReportingController: "node-controller",
				Type:                corev1.EventTypeNormal,
			},
			want: []any{"5m", "Normal", "RegisteredNode", "node/node-1", "", "node-controller", "Registered Node node-1", "5m", int64(1), "node-1.17b"},
		},
		{
			name: "events.k8s.io series",
			obj: &corev1.Event{
				ObjectMeta:          objectMeta("x.17c", time.Hour),
				InvolvedObject:      corev1.ObjectReference{Kind: "Service"},
				Reason:              "Sync",
				EventTime:           metav1.NewMicroTime(testNow.Add(-time.Hour)),
				Series:              &corev1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(testNow.Add(-10 * time.Second))},
				ReportingController: "portal",
				ReportingInstance:   "portal-0",
				Type:                corev1.EventTypeNormal,
			},
			want: []any{"10s", "Normal", "Sync", "service", "", "portal, portal-0", "", "60m", int64(4), "x.17c"},
		},
		{
			name: "no times at all",
			obj:  &corev1.Event{ObjectMeta: objectMeta("bare", time.Hour)},
			want: []any{"<unknown>", "", "", "", "", "", "", "<unknown>", int64(1), "bare"},
		},
	}
	runRowCases(t, gr("", "events"), cases)
}
