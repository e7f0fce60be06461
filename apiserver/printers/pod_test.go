package printers

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func running() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
}

func waiting(reason string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
}

func terminated(reason string, exitCode int32) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: exitCode}}
}

// lastTerminated is a LastTerminationState that finished d before testNow.
func lastTerminated(d time.Duration) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, FinishedAt: ago(d)}}
}

func containers(names ...string) []corev1.Container {
	var cs []corev1.Container
	for _, n := range names {
		cs = append(cs, corev1.Container{Name: n})
	}
	return cs
}

func TestPodRows(t *testing.T) {
	cases := []rowCase{
		{
			name: "running with one of two containers ready",
			obj: &corev1.Pod{
				ObjectMeta: objectMeta("web", 10*time.Minute),
				Spec:       corev1.PodSpec{Containers: containers("app", "proxy"), NodeName: "node-1"},
				Status: corev1.PodStatus{
					Phase:  corev1.PodRunning,
					PodIPs: []corev1.PodIP{{IP: "10.244.0.5"}, {IP: "fd00::5"}},
					ContainerStatuses: []corev1.ContainerStatus{
						{Name: "app", Ready: true, State: running()},
						{Name: "proxy", Ready: false, State: running()},
					},
				},
			},
			want: []any{"web", "1/2", "Running", "0", "10m", "10.244.0.5", "node-1", "<none>", "<none>"},
		},
		{
			name: "crash-looping container shows reason and last restart",
			obj: &corev1.Pod{
				ObjectMeta: objectMeta("crash", 3*time.Hour),
				Spec:       corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{
					Phase: corev1.PodRunning,
					ContainerStatuses: []corev1.ContainerStatus{{
						Name: "app", RestartCount: 5,
						State:                waiting("CrashLoopBackOff"),
						LastTerminationState: lastTerminated(2 * time.Minute),
					}},
				},
			},
			want: []any{"crash", "0/1", "CrashLoopBackOff", "5 (2m ago)", "3h", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "terminating pod",
			obj: &corev1.Pod{
				ObjectMeta: func() metav1.ObjectMeta {
					m := objectMeta("leaving", time.Hour)
					m.DeletionTimestamp = ptr(ago(time.Second))
					return m
				}(),
				Spec: corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{
					Phase:             corev1.PodRunning,
					ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, State: running()}},
				},
			},
			want: []any{"leaving", "1/1", "Terminating", "0", "60m", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "deleted pod on a lost node is unknown",
			obj: &corev1.Pod{
				ObjectMeta: func() metav1.ObjectMeta {
					m := objectMeta("lost", time.Hour)
					m.DeletionTimestamp = ptr(ago(time.Second))
					return m
				}(),
				Spec:   corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Reason: "NodeLost"},
			},
			want: []any{"lost", "0/1", "Unknown", "0", "60m", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "completed pod",
			obj: &corev1.Pod{
				ObjectMeta: objectMeta("job-x", 2*24*time.Hour),
				Spec:       corev1.PodSpec{Containers: containers("main")},
				Status: corev1.PodStatus{
					Phase:             corev1.PodSucceeded,
					ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: terminated("Completed", 0)}},
				},
			},
			want: []any{"job-x", "0/1", "Completed", "0", "2d", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "terminated without reason shows exit code",
			obj: &corev1.Pod{
				ObjectMeta: objectMeta("oops", time.Minute),
				Spec:       corev1.PodSpec{Containers: containers("main")},
				Status: corev1.PodStatus{
					Phase:             corev1.PodFailed,
					ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: terminated("", 2)}},
				},
			},
			want: []any{"oops", "0/1", "ExitCode:2", "0", "60s", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "completed container beside a running one",
			obj: &corev1.Pod{
				ObjectMeta: objectMeta("mixed", time.Minute),
				Spec:       corev1.PodSpec{Containers: containers("a", "b")},
				Status: corev1.PodStatus{
					Phase:      corev1.PodRunning,
					Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
					ContainerStatuses: []corev1.ContainerStatus{
						{Name: "a", State: terminated("Completed", 0)},
						{Name: "b", Ready: true, State: running()},
					},
				},
			},
			want: []any{"mixed", "1/2", "NotReady", "0", "60s", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "second of three init containers running",
			obj: &corev1.Pod{
				ObjectMeta: objectMeta("init", time.Minute),
				Spec:       corev1.PodSpec{InitContainers: containers("i1", "i2", "i3"), Containers: containers("app")},
				Status: corev1.PodStatus{
					Phase: corev1.PodPending,
					InitContainerStatuses: []corev1.ContainerStatus{
						{Name: "i1", State: terminated("Completed", 0)},
						{Name: "i2", State: running()},
						{Name: "i3", State: waiting("PodInitializing")},
					},
					ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: waiting("PodInitializing")}},
				},
			},
			want: []any{"init", "0/1", "Init:1/3", "0", "60s", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "failing init container",
			obj: &corev1.Pod{
				ObjectMeta: objectMeta("initfail", time.Hour),
				Spec:       corev1.PodSpec{InitContainers: containers("i1"), Containers: containers("app")},
				Status: corev1.PodStatus{
					Phase: corev1.PodPending,
					InitContainerStatuses: []corev1.ContainerStatus{{
						Name: "i1", RestartCount: 3,
						State:                waiting("CrashLoopBackOff"),
						LastTerminationState: lastTerminated(30 * time.Second),
					}},
				},
			},
			want: []any{"initfail", "0/1", "Init:CrashLoopBackOff", "3 (30s ago)", "60m", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "started sidecar counts as a ready container",
			obj: &corev1.Pod{
				ObjectMeta: objectMeta("sidecar", time.Hour),
				Spec: corev1.PodSpec{
					InitContainers: []corev1.Container{{Name: "mesh", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways)}},
					Containers:     containers("app"),
				},
				Status: corev1.PodStatus{
					Phase:      corev1.PodRunning,
					Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}},
					InitContainerStatuses: []corev1.ContainerStatus{{
						Name: "mesh", Ready: true, Started: ptr(true), RestartCount: 1,
						State: running(), LastTerminationState: lastTerminated(5 * time.Minute),
					}},
					ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, State: running()}},
				},
			},
			want: []any{"sidecar", "2/2", "Running", "1 (5m ago)", "60m", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "scheduling gated",
			obj: &corev1.Pod{
				ObjectMeta: objectMeta("gated", time.Minute),
				Spec:       corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{
					Phase:      corev1.PodPending,
					Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}},
				},
			},
			want: []any{"gated", "0/1", "SchedulingGated", "0", "60s", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "nominated node and readiness gates",
			obj: &corev1.Pod{
				ObjectMeta: objectMeta("gates", time.Minute),
				Spec: corev1.PodSpec{
					Containers:     containers("app"),
					ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}},
				},
				Status: corev1.PodStatus{
					Phase:             corev1.PodPending,
					NominatedNodeName: "node-2",
					Conditions:        []corev1.PodCondition{{Type: "example.com/lb", Status: corev1.ConditionTrue}},
				},
			},
			want: []any{"gates", "0/1", "Pending", "0", "60s", "<none>", "<none>", "node-2", "1/2"},
		},
	}
	runRowCases(t, gr("", "pods"), cases)
}

func TestPodRowConditions(t *testing.T) {
	pinClock(t)
	cases := []struct {
		name  string
		phase corev1.PodPhase
		want  []metav1.TableRowCondition
	}{
		{"running has none", corev1.PodRunning, nil},
		{"succeeded is completed", corev1.PodSucceeded, []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "The pod has completed successfully."}}},
		{"failed is completed", corev1.PodFailed, []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Failed", Message: "The pod failed."}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{Phase: tc.phase}}
			table := convert(t, gr("", "pods"), pod, nil)
			if got := table.Rows[0].Conditions; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got conditions %+v, want %+v", got, tc.want)
			}
		})
	}
}
