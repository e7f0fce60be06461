package printers

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
)

// The template columns every workload shows under -o wide.
var (
	containersColumn = wideColumn("Containers", "string", "Names of each container in the template.")
	imagesColumn     = wideColumn("Images", "string", "Images referenced by each container in the template.")
	readyOfColumn    = column("Ready", "string", "Number of the pod with ready state")
)

var deploymentPrinter = printer[*appsv1.Deployment]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		readyOfColumn,
		column("Up-to-date", "string", appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]),
		column("Available", "string", appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]),
		ageColumn,
		containersColumn,
		imagesColumn,
		wideColumn("Selector", "string", appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]),
	},
	cells: func(d *appsv1.Deployment) []any {
		names, images := containerCells(d.Spec.Template.Spec.Containers)
		// Upstream prints the Deployment's selector as a selector string,
		// where the other workloads use the label-selector formatter.
		selector := "<invalid>"
		if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
			selector = s.String()
		}
		return []any{d.Name, readyOf(d.Status.ReadyReplicas, d.Spec.Replicas),
			int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas),
			age(d.CreationTimestamp), names, images, selector}
	},
}

var replicaSetPrinter = printer[*appsv1.ReplicaSet]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Desired", "integer", appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]),
		column("Current", "integer", appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]),
		column("Ready", "integer", appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]),
		ageColumn,
		containersColumn,
		imagesColumn,
		wideColumn("Selector", "string", appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]),
	},
	cells: func(rs *appsv1.ReplicaSet) []any {
		names, images := containerCells(rs.Spec.Template.Spec.Containers)
		return []any{rs.Name, int64(deref(rs.Spec.Replicas)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
			age(rs.CreationTimestamp), names, images, metav1.FormatLabelSelector(rs.Spec.Selector)}
	},
}

var statefulSetPrinter = printer[*appsv1.StatefulSet]{
	columns: []metav1.TableColumnDefinition{nameColumn, readyOfColumn, ageColumn, containersColumn, imagesColumn},
	cells: func(s *appsv1.StatefulSet) []any {
		names, images := containerCells(s.Spec.Template.Spec.Containers)
		return []any{s.Name, readyOf(s.Status.ReadyReplicas, s.Spec.Replicas), age(s.CreationTimestamp), names, images}
	},
}

var daemonSetPrinter = printer[*appsv1.DaemonSet]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Desired", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["desiredNumberScheduled"]),
		column("Current", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["currentNumberScheduled"]),
		column("Ready", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["numberReady"]),
		column("Up-to-date", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["updatedNumberScheduled"]),
		column("Available", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["numberAvailable"]),
		column("Node Selector", "string", corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
		ageColumn,
		containersColumn,
		imagesColumn,
		wideColumn("Selector", "string", appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]),
	},
	cells: func(ds *appsv1.DaemonSet) []any {
		st := ds.Status
		names, images := containerCells(ds.Spec.Template.Spec.Containers)
		return []any{ds.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
			int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
			age(ds.CreationTimestamp), names, images, metav1.FormatLabelSelector(ds.Spec.Selector)}
	},
}

var controllerRevisionPrinter = printer[*appsv1.ControllerRevision]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Controller", "string", "Controller of the object"),
		column("Revision", "string", appsv1.ControllerRevision{}.SwaggerDoc()["revision"]),
		ageColumn,
	},
	cells: func(r *appsv1.ControllerRevision) []any {
		return []any{r.Name, controllerOf(r.OwnerReferences), r.Revision, age(r.CreationTimestamp)}
	},
}

// readyOf renders "ready/desired", as the READY column of Deployments and
// StatefulSets shows it.
func readyOf(ready int32, desired *int32) string {
	return fmt.Sprintf("%d/%d", ready, deref(desired))
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// containerCells renders a template's container names and images, each
// joined by commas.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	im := make([]string, len(containers))
	for i, c := range containers {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

// controllerOf names the controlling owner as kubectl names resources,
// "statefulset.apps/web", or "<none>".
func controllerOf(refs []metav1.OwnerReference) string {
	for _, ref := range refs {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || ref.Kind == "" {
			return ref.Name
		}
		return strings.ToLower(gv.WithKind(ref.Kind).GroupKind().String()) + "/" + ref.Name
	}
	return "<none>"
}

// ScaleConvertor prints a Scale, as `kubectl get deploy web
// --subresource=scale` shows it: NAME DESIRED AVAILABLE AGE. As upstream's,
// its name column carries no "name" format.
var ScaleConvertor rest.TableConvertor = printer[*autoscalingv1.Scale]{
	columns: []metav1.TableColumnDefinition{
		column("Name", "string", objectMetaDoc["name"]),
		column("Desired", "integer", autoscalingv1.ScaleSpec{}.SwaggerDoc()["replicas"]),
		column("Available", "integer", autoscalingv1.ScaleStatus{}.SwaggerDoc()["replicas"]),
		ageColumn,
	},
	cells: func(s *autoscalingv1.Scale) []any {
		return []any{s.Name, int64(s.Spec.Replicas), int64(s.Status.Replicas), age(s.CreationTimestamp)}
	},
}
