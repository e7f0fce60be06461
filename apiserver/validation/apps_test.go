package validation

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validTemplate is a defaulted pod template labelled app=web.
func validTemplate() corev1.PodTemplateSpec {
	pod := validPod()
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}},
		Spec:       pod.Spec,
	}
}

func webSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
}

func percent(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
func count(n int) *intstr.IntOrString      { v := intstr.FromInt32(int32(n)); return &v }

// validDeployment is a valid, defaulted Deployment.
func validDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "1"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(3)),
			Selector: webSelector(),
			Template: validTemplate(),
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: percent("25%"), MaxSurge: percent("25%")},
			},
			RevisionHistoryLimit:    ptr(int32(10)),
			ProgressDeadlineSeconds: ptr(int32(600)),
		},
	}
}

// validReplicaSet is a valid, defaulted ReplicaSet.
func validReplicaSet() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d78c9b8f4", Namespace: "ns", ResourceVersion: "1"},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr(int32(3)), Selector: webSelector(), Template: validTemplate()},
	}
}

// validStatefulSet is a valid, defaulted StatefulSet.
func validStatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "1"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr(int32(3)),
			Selector:            webSelector(),
			Template:            validTemplate(),
			ServiceName:         "nginx",
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(0))},
			},
			RevisionHistoryLimit: ptr(int32(10)),
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
	}
}

// validDaemonSet is a valid, defaulted DaemonSet.
func validDaemonSet() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns", ResourceVersion: "1"},
		Spec: appsv1.DaemonSetSpec{
			Selector: webSelector(),
			Template: validTemplate(),
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: count(1), MaxSurge: count(0)},
			},
			RevisionHistoryLimit: ptr(int32(10)),
		},
	}
}

// templateEdit changes a workload's selector or pod template.
type templateEdit func(sel **metav1.LabelSelector, tmpl *corev1.PodTemplateSpec)

// workloadKind validates one kind's valid object after an edit of its
// selector and template.
type workloadKind struct {
	kind      string
	emptyName string // the kind named in the empty-selector message
	validate  func(templateEdit) field.ErrorList
}

var workloadKinds = []workloadKind{
	{"Deployment", "deployment", func(edit templateEdit) field.ErrorList {
		d := validDeployment()
		edit(&d.Spec.Selector, &d.Spec.Template)
		return ValidateDeployment(d)
	}},
	{"ReplicaSet", "deployment", func(edit templateEdit) field.ErrorList {
		rs := validReplicaSet()
		edit(&rs.Spec.Selector, &rs.Spec.Template)
		return ValidateReplicaSet(rs)
	}},
	{"StatefulSet", "statefulset", func(edit templateEdit) field.ErrorList {
		sts := validStatefulSet()
		edit(&sts.Spec.Selector, &sts.Spec.Template)
		return ValidateStatefulSet(sts)
	}},
	{"DaemonSet", "daemonset", func(edit templateEdit) field.ErrorList {
		ds := validDaemonSet()
		edit(&ds.Spec.Selector, &ds.Spec.Template)
		return ValidateDaemonSet(ds)
	}},
}

// TestWorkloadSelectorAndTemplate covers the rules all four kinds apply to
// their selector and pod template.
func TestWorkloadSelectorAndTemplate(t *testing.T) {
	for _, k := range workloadKinds {
		// A Deployment's template is validated as its ReplicaSets' one.
		deadlineKind := k.kind
		if k.kind == "Deployment" {
			deadlineKind = "ReplicaSet"
		}
		cases := []struct {
			name string
			edit templateEdit
			want []wantErr
		}{
			{name: "valid", edit: func(**metav1.LabelSelector, *corev1.PodTemplateSpec) {}},
			{name: "selector required", edit: func(s **metav1.LabelSelector, _ *corev1.PodTemplateSpec) { *s = nil },
				want: []wantErr{e("spec.selector", tRequired)}},
			{name: "empty selector", edit: func(s **metav1.LabelSelector, _ *corev1.PodTemplateSpec) { *s = &metav1.LabelSelector{} },
				want: []wantErr{e("spec.selector", tInvalid, "empty selector is invalid for "+k.emptyName)}},
			{name: "selector not matching template labels", edit: func(s **metav1.LabelSelector, _ *corev1.PodTemplateSpec) {
				(*s).MatchLabels["app"] = "api"
			}, want: []wantErr{e("spec.template.metadata.labels", tInvalid, "`selector` does not match template `labels`")}},
			{name: "template without the selected label", edit: func(_ **metav1.LabelSelector, tmpl *corev1.PodTemplateSpec) {
				delete(tmpl.Labels, "app")
			}, want: []wantErr{e("spec.template.metadata.labels", tInvalid, "`selector` does not match template `labels`")}},
			{name: "selector by matching expression", edit: func(s **metav1.LabelSelector, _ *corev1.PodTemplateSpec) {
				*s = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front", "back"}}}}
			}},
			{name: "selector with bad operator", edit: func(s **metav1.LabelSelector, _ *corev1.PodTemplateSpec) {
				(*s).MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}
			}, want: []wantErr{e("spec.selector.matchExpressions[0].operator", tInvalid)}},
			{name: "selector with bad label value", edit: func(s **metav1.LabelSelector, _ *corev1.PodTemplateSpec) {
				(*s).MatchLabels["app"] = "web server"
			}, want: []wantErr{e("spec.selector.matchLabels", tInvalid)}},
			{name: "template label invalid", edit: func(_ **metav1.LabelSelector, tmpl *corev1.PodTemplateSpec) { tmpl.Labels["bad key!"] = "x" },
				want: []wantErr{e("spec.template.labels", tInvalid)}},
			{name: "template spec checked as a pod's", edit: func(_ **metav1.LabelSelector, tmpl *corev1.PodTemplateSpec) {
				tmpl.Spec.Containers[0].Image = ""
				tmpl.Spec.Containers[0].Ports[0].ContainerPort = 70000
			}, want: []wantErr{
				e("spec.template.spec.containers[0].image", tRequired),
				e("spec.template.spec.containers[0].ports[0].containerPort", tInvalid, "must be between 1 and 65535"),
			}},
			{name: "template without containers", edit: func(_ **metav1.LabelSelector, tmpl *corev1.PodTemplateSpec) { tmpl.Spec.Containers = nil },
				want: []wantErr{e("spec.template.spec.containers", tRequired)}},
			{name: "restartPolicy OnFailure", edit: func(_ **metav1.LabelSelector, tmpl *corev1.PodTemplateSpec) {
				tmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			}, want: []wantErr{e("spec.template.spec.restartPolicy", tNotSupported, `supported values: "Always"`)}},
			{name: "activeDeadlineSeconds", edit: func(_ **metav1.LabelSelector, tmpl *corev1.PodTemplateSpec) {
				tmpl.Spec.ActiveDeadlineSeconds = ptr(int64(30))
			}, want: []wantErr{e("spec.template.spec.activeDeadlineSeconds", tForbidden, "activeDeadlineSeconds in "+deadlineKind+" is not Supported")}},
			{name: "ephemeral containers", edit: func(_ **metav1.LabelSelector, tmpl *corev1.PodTemplateSpec) {
				tmpl.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
			}, want: []wantErr{e("spec.template.spec.ephemeralContainers", tForbidden)}},
		}
		for _, tc := range cases {
			t.Run(k.kind+"/"+tc.name, func(t *testing.T) {
				checkErrs(t, k.validate(tc.edit), tc.want...)
			})
		}
	}
}

func TestValidateDeployment(t *testing.T) {
	ru := func(d *appsv1.Deployment) *appsv1.RollingUpdateDeployment { return d.Spec.Strategy.RollingUpdate }
	cases := []struct {
		name string
		edit func(*appsv1.Deployment)
		want []wantErr
	}{
		{name: "valid"},
		{name: "bad name", edit: func(d *appsv1.Deployment) { d.Name = "Web" },
			want: []wantErr{e("metadata.name", tInvalid, "RFC 1123 subdomain")}},
		{name: "negative replicas", edit: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(-1)) },
			want: []wantErr{e("spec.replicas", tInvalid, "must be greater than or equal to 0")}},
		{name: "zero replicas", edit: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(0)) }},
		{name: "negative minReadySeconds", edit: func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = -1 },
			want: []wantErr{e("spec.minReadySeconds", tInvalid, "must be greater than or equal to 0")}},
		{name: "negative revisionHistoryLimit", edit: func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr(int32(-1)) },
			want: []wantErr{e("spec.revisionHistoryLimit", tInvalid, "must be greater than or equal to 0")}},
		{name: "zero revisionHistoryLimit", edit: func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr(int32(0)) }},
		{name: "progressDeadlineSeconds equal to minReadySeconds", edit: func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 30
			d.Spec.ProgressDeadlineSeconds = ptr(int32(30))
		}, want: []wantErr{e("spec.progressDeadlineSeconds", tInvalid, "must be greater than minReadySeconds")}},
		{name: "negative progressDeadlineSeconds", edit: func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = ptr(int32(-5)) },
			want: []wantErr{
				e("spec.progressDeadlineSeconds", tInvalid, "must be greater than or equal to 0"),
				e("spec.progressDeadlineSeconds", tInvalid, "must be greater than minReadySeconds"),
			}},
		{name: "Recreate", edit: func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		}},
		{name: "Recreate with rollingUpdate", edit: func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType },
			want: []wantErr{e("spec.strategy.rollingUpdate", tForbidden, "may not be specified when strategy `type` is 'Recreate'")}},
		{name: "unknown strategy", edit: func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" },
			want: []wantErr{e("spec.strategy", tNotSupported, `"Recreate", "RollingUpdate"`)}},
		{name: "RollingUpdate without parameters", edit: func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate = nil },
			want: []wantErr{e("spec.strategy.rollingUpdate", tRequired)}},
		{name: "maxSurge and maxUnavailable both 0", edit: func(d *appsv1.Deployment) {
			ru(d).MaxSurge, ru(d).MaxUnavailable = count(0), count(0)
		}, want: []wantErr{e("spec.strategy.rollingUpdate.maxUnavailable", tInvalid, "may not be 0 when `maxSurge` is 0")}},
		{name: "maxSurge 0% and maxUnavailable 0", edit: func(d *appsv1.Deployment) {
			ru(d).MaxSurge, ru(d).MaxUnavailable = percent("0%"), count(0)
		}, want: []wantErr{e("spec.strategy.rollingUpdate.maxUnavailable", tInvalid, "may not be 0 when `maxSurge` is 0")}},
		{name: "maxUnavailable 0 with a surge", edit: func(d *appsv1.Deployment) { ru(d).MaxUnavailable = count(0) }},
		{name: "maxUnavailable over 100%", edit: func(d *appsv1.Deployment) { ru(d).MaxUnavailable = percent("150%") },
			want: []wantErr{e("spec.strategy.rollingUpdate.maxUnavailable", tInvalid, "must not be greater than 100%")}},
		{name: "maxSurge over 100% is allowed", edit: func(d *appsv1.Deployment) { ru(d).MaxSurge = percent("200%") }},
		{name: "negative maxSurge", edit: func(d *appsv1.Deployment) { ru(d).MaxSurge = count(-1) },
			want: []wantErr{e("spec.strategy.rollingUpdate.maxSurge", tInvalid, "must be greater than or equal to 0")}},
		{name: "maxSurge not a percent", edit: func(d *appsv1.Deployment) { ru(d).MaxSurge = percent("25") },
			want: []wantErr{e("spec.strategy.rollingUpdate.maxSurge", tInvalid, "a valid percent string")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := validDeployment()
			if tc.edit != nil {
				tc.edit(d)
			}
			checkErrs(t, ValidateDeployment(d), tc.want...)
		})
	}
}

// TestWorkloadUpdates: a changed selector is refused for every kind, with
// metadata checked as for other kinds, while scaling is allowed.
func TestWorkloadUpdates(t *testing.T) {
	otherSel := func() *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}
	}
	cases := []struct {
		name string
		run  func() field.ErrorList
		want []wantErr
	}{
		{name: "Deployment scaled", run: func() field.ErrorList {
			old, d := validDeployment(), validDeployment()
			d.Spec.Replicas = ptr(int32(5))
			return ValidateDeploymentUpdate(d, old)
		}},
		{name: "Deployment selector changed", run: func() field.ErrorList {
			old, d := validDeployment(), validDeployment()
			d.Spec.Selector = otherSel()
			return ValidateDeploymentUpdate(d, old)
		}, want: []wantErr{e("spec.selector", tInvalid, "field is immutable")}},
		{name: "Deployment renamed", run: func() field.ErrorList {
			old, d := validDeployment(), validDeployment()
			d.Name = "api"
			return ValidateDeploymentUpdate(d, old)
		}, want: []wantErr{e("metadata.name", tInvalid, "field is immutable")}},
		{name: "Deployment update checks the spec", run: func() field.ErrorList {
			old, d := validDeployment(), validDeployment()
			d.Spec.Replicas = ptr(int32(-2))
			return ValidateDeploymentUpdate(d, old)
		}, want: []wantErr{e("spec.replicas", tInvalid)}},
		{name: "ReplicaSet selector changed", run: func() field.ErrorList {
			old, rs := validReplicaSet(), validReplicaSet()
			rs.Spec.Selector = otherSel()
			return ValidateReplicaSetUpdate(rs, old)
		}, want: []wantErr{e("spec.selector", tInvalid, "field is immutable")}},
		{name: "ReplicaSet template changed", run: func() field.ErrorList {
			old, rs := validReplicaSet(), validReplicaSet()
			rs.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
			return ValidateReplicaSetUpdate(rs, old)
		}},
		{name: "DaemonSet selector changed", run: func() field.ErrorList {
			old, ds := validDaemonSet(), validDaemonSet()
			ds.Spec.Selector = otherSel()
			return ValidateDaemonSetUpdate(ds, old)
		}, want: []wantErr{e("spec.selector", tInvalid, "field is immutable")}},
		{name: "DaemonSet strategy changed", run: func() field.ErrorList {
			old, ds := validDaemonSet(), validDaemonSet()
			ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
			return ValidateDaemonSetUpdate(ds, old)
		}},
		{name: "DaemonSet metadata without resourceVersion", run: func() field.ErrorList {
			old, ds := validDaemonSet(), validDaemonSet()
			ds.ResourceVersion = ""
			return ValidateDaemonSetUpdate(ds, old)
		}, want: []wantErr{e("metadata.resourceVersion", tInvalid)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkErrs(t, tc.run(), tc.want...) })
	}
}

func TestValidateReplicaSet(t *testing.T) {
	cases := []struct {
		name string
		edit func(*appsv1.ReplicaSet)
		want []wantErr
	}{
		{name: "valid"},
		{name: "negative replicas", edit: func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr(int32(-1)) },
			want: []wantErr{e("spec.replicas", tInvalid, "must be greater than or equal to 0")}},
		{name: "negative minReadySeconds", edit: func(rs *appsv1.ReplicaSet) { rs.Spec.MinReadySeconds = -1 },
			want: []wantErr{e("spec.minReadySeconds", tInvalid)}},
		{name: "bad namespace", edit: func(rs *appsv1.ReplicaSet) { rs.Namespace = "" },
			want: []wantErr{e("metadata.namespace", tRequired)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs := validReplicaSet()
			if tc.edit != nil {
				tc.edit(rs)
			}
			checkErrs(t, ValidateReplicaSet(rs), tc.want...)
		})
	}
}

func TestValidateDaemonSet(t *testing.T) {
	ru := func(ds *appsv1.DaemonSet) *appsv1.RollingUpdateDaemonSet { return ds.Spec.UpdateStrategy.RollingUpdate }
	cases := []struct {
		name string
		edit func(*appsv1.DaemonSet)
		want []wantErr
	}{
		{name: "valid"},
		{name: "OnDelete", edit: func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
		}},
		{name: "unknown strategy", edit: func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.Type = "Everywhere" },
			want: []wantErr{e("spec.updateStrategy", tNotSupported, `"RollingUpdate", "OnDelete"`)}},
		{name: "RollingUpdate without parameters", edit: func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate = nil },
			want: []wantErr{e("spec.updateStrategy.rollingUpdate", tRequired)}},
		{name: "surge instead of unavailable", edit: func(ds *appsv1.DaemonSet) { ru(ds).MaxUnavailable, ru(ds).MaxSurge = count(0), percent("10%") }},
		{name: "both 0", edit: func(ds *appsv1.DaemonSet) { ru(ds).MaxUnavailable = percent("0%") },
			want: []wantErr{e("spec.updateStrategy.rollingUpdate.maxUnavailable", tRequired, "cannot be 0 when maxSurge is 0")}},
		{name: "both non-zero", edit: func(ds *appsv1.DaemonSet) { ru(ds).MaxSurge = count(1) },
			want: []wantErr{e("spec.updateStrategy.rollingUpdate.maxSurge", tInvalid, "may not be set when maxUnavailable is non-zero")}},
		{name: "maxUnavailable over 100%", edit: func(ds *appsv1.DaemonSet) { ru(ds).MaxUnavailable = percent("101%") },
			want: []wantErr{e("spec.updateStrategy.rollingUpdate.maxUnavailable", tInvalid, "must not be greater than 100%")}},
		{name: "maxSurge over 100%", edit: func(ds *appsv1.DaemonSet) { ru(ds).MaxUnavailable, ru(ds).MaxSurge = count(0), percent("120%") },
			want: []wantErr{e("spec.updateStrategy.rollingUpdate.maxSurge", tInvalid, "must not be greater than 100%")}},
		{name: "negative maxUnavailable", edit: func(ds *appsv1.DaemonSet) { ru(ds).MaxUnavailable = count(-1) },
			want: []wantErr{e("spec.updateStrategy.rollingUpdate.maxUnavailable", tInvalid, "must be greater than or equal to 0")}},
		{name: "negative minReadySeconds", edit: func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = -1 },
			want: []wantErr{e("spec.minReadySeconds", tInvalid)}},
		{name: "negative revisionHistoryLimit", edit: func(ds *appsv1.DaemonSet) { ds.Spec.RevisionHistoryLimit = ptr(int32(-1)) },
			want: []wantErr{e("spec.revisionHistoryLimit", tInvalid)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := validDaemonSet()
			if tc.edit != nil {
				tc.edit(ds)
			}
			checkErrs(t, ValidateDaemonSet(ds), tc.want...)
		})
	}
}

func TestValidateStatefulSet(t *testing.T) {
	ru := func(s *appsv1.StatefulSet) *appsv1.RollingUpdateStatefulSetStrategy {
		return s.Spec.UpdateStrategy.RollingUpdate
	}
	cases := []struct {
		name string
		edit func(*appsv1.StatefulSet)
		want []wantErr
	}{
		{name: "valid"},
		{name: "52-character name", edit: func(s *appsv1.StatefulSet) { s.Name = strings.Repeat("a", 52) }},
		{name: "53-character name", edit: func(s *appsv1.StatefulSet) { s.Name = strings.Repeat("a", 53) },
			want: []wantErr{e("metadata.name", tInvalid, "must be no more than 52 characters, so that its pods' controller-revision-hash label")}},
		{name: "generateName prefix", edit: func(s *appsv1.StatefulSet) { s.GenerateName = "web-" }},
		{name: "name with a dot", edit: func(s *appsv1.StatefulSet) { s.Name = "web.v1" },
			want: []wantErr{e("metadata.name", tInvalid, "must not contain dots")}},
		{name: "Parallel", edit: func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }},
		{name: "podManagementPolicy required", edit: func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = "" },
			want: []wantErr{e("spec.podManagementPolicy", tRequired)}},
		{name: "unknown podManagementPolicy", edit: func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = "Random" },
			want: []wantErr{e("spec.podManagementPolicy", tInvalid, "must be 'OrderedReady' or 'Parallel'")}},
		{name: "updateStrategy required", edit: func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{} },
			want: []wantErr{e("spec.updateStrategy", tRequired)}},
		{name: "unknown updateStrategy", edit: func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = "Canary" },
			want: []wantErr{e("spec.updateStrategy", tInvalid, "must be 'RollingUpdate' or 'OnDelete'")}},
		{name: "OnDelete with rollingUpdate", edit: func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType },
			want: []wantErr{e("spec.updateStrategy.rollingUpdate", tInvalid, "only allowed for updateStrategy 'RollingUpdate'")}},
		{name: "negative partition", edit: func(s *appsv1.StatefulSet) { ru(s).Partition = ptr(int32(-1)) },
			want: []wantErr{e("spec.updateStrategy.rollingUpdate.partition", tInvalid, "must be greater than or equal to 0")}},
		{name: "maxUnavailable 2", edit: func(s *appsv1.StatefulSet) { ru(s).MaxUnavailable = count(2) }},
		{name: "maxUnavailable 0", edit: func(s *appsv1.StatefulSet) { ru(s).MaxUnavailable = count(0) },
			want: []wantErr{e("spec.updateStrategy.rollingUpdate.maxUnavailable", tInvalid, "cannot be 0")}},
		{name: "maxUnavailable over 100%", edit: func(s *appsv1.StatefulSet) { ru(s).MaxUnavailable = percent("110%") },
			want: []wantErr{e("spec.updateStrategy.rollingUpdate.maxUnavailable", tInvalid, "must not be greater than 100%")}},
		{name: "negative replicas", edit: func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr(int32(-3)) },
			want: []wantErr{e("spec.replicas", tInvalid, "must be greater than or equal to 0")}},
		{name: "negative minReadySeconds", edit: func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = -1 },
			want: []wantErr{e("spec.minReadySeconds", tInvalid)}},
		{name: "negative revisionHistoryLimit", edit: func(s *appsv1.StatefulSet) { s.Spec.RevisionHistoryLimit = ptr(int32(-1)) },
			want: []wantErr{e("spec.revisionHistoryLimit", tInvalid)}},
		{name: "ordinals start 5", edit: func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }},
		{name: "negative ordinals start", edit: func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: -1} },
			want: []wantErr{e("spec.ordinals.start", tInvalid, "must be greater than or equal to 0")}},
		{name: "no serviceName", edit: func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "" }},
		{name: "serviceName not a DNS label", edit: func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "nginx.svc" },
			want: []wantErr{e("spec.serviceName", tInvalid, "must not contain dots")}},
		{name: "volumeClaimTemplates refused", edit: func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "www"}}}
		}, want: []wantErr{e("spec.volumeClaimTemplates", tForbidden, "Portal has no storage")}},
		{name: "retention policy Delete", edit: func(s *appsv1.StatefulSet) {
			s.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		}},
		{name: "retention policy unknown", edit: func(s *appsv1.StatefulSet) {
			s.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = "Archive"
		}, want: []wantErr{e("spec.persistentVolumeClaimRetentionPolicy.whenScaled", tNotSupported, `"Retain", "Delete"`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := validStatefulSet()
			if tc.edit != nil {
				tc.edit(s)
			}
			checkErrs(t, ValidateStatefulSet(s), tc.want...)
		})
	}
}

func TestValidateStatefulSetUpdate(t *testing.T) {
	const onlyMsg = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy', 'minReadySeconds' and 'revisionHistoryLimit' are forbidden"
	cases := []struct {
		name string
		edit func(*appsv1.StatefulSet)
		want []wantErr
	}{
		{name: "unchanged"},
		{name: "allowed fields changed", edit: func(s *appsv1.StatefulSet) {
			s.Spec.Replicas = ptr(int32(5))
			s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 1}
			s.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr(int32(2))
			s.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
			s.Spec.MinReadySeconds = 10
			s.Spec.RevisionHistoryLimit = ptr(int32(3))
		}},
		{name: "serviceName changed", edit: func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "web" },
			want: []wantErr{e("spec", tForbidden, onlyMsg+" (changed: serviceName)")}},
		{name: "podManagementPolicy and serviceName changed", edit: func(s *appsv1.StatefulSet) {
			s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
			s.Spec.ServiceName = "web"
		}, want: []wantErr{e("spec", tForbidden, onlyMsg+" (changed: serviceName, podManagementPolicy)")}},
		{name: "selector changed", edit: func(s *appsv1.StatefulSet) { s.Spec.Selector.MatchLabels["tier"] = "front" },
			want: []wantErr{e("spec.selector", tInvalid, "field is immutable")}},
		{name: "update checks the new spec", edit: func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr(int32(-1)) },
			want: []wantErr{e("spec.replicas", tInvalid)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, s := validStatefulSet(), validStatefulSet()
			if tc.edit != nil {
				tc.edit(s)
			}
			checkErrs(t, ValidateStatefulSetUpdate(s, old), tc.want...)
		})
	}
}

func TestWorkloadStatusUpdates(t *testing.T) {
	cases := []struct {
		name string
		run  func() field.ErrorList
		want []wantErr
	}{
		{name: "Deployment status valid", run: func() field.ErrorList {
			old, d := validDeployment(), validDeployment()
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 2, UnavailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse}, {Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue}}}
			return ValidateDeploymentStatusUpdate(d, old)
		}},
		{name: "Deployment status counts", run: func() field.ErrorList {
			old, d := validDeployment(), validDeployment()
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: -1, Replicas: 2, UpdatedReplicas: 3, ReadyReplicas: 1, AvailableReplicas: 2, UnavailableReplicas: -1}
			return ValidateDeploymentStatusUpdate(d, old)
		}, want: []wantErr{
			e("status.observedGeneration", tInvalid, "must be greater than or equal to 0"),
			e("status.unavailableReplicas", tInvalid, "must be greater than or equal to 0"),
			e("status.updatedReplicas", tInvalid, "cannot be greater than status.replicas"),
			e("status.availableReplicas", tInvalid, "cannot be greater than readyReplicas"),
		}},
		{name: "Deployment conditions", run: func() field.ErrorList {
			old, d := validDeployment(), validDeployment()
			d.Status.Conditions = []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue},
				{Type: appsv1.DeploymentAvailable, Status: "Maybe"},
				{Status: corev1.ConditionTrue},
			}
			return ValidateDeploymentStatusUpdate(d, old)
		}, want: []wantErr{
			e("status.conditions[1].type", tDuplicate),
			e("status.conditions[1].status", tNotSupported, `"True", "False", "Unknown"`),
			e("status.conditions[2].type", tRequired),
		}},
		{name: "Deployment collisionCount decremented", run: func() field.ErrorList {
			old, d := validDeployment(), validDeployment()
			old.Status.CollisionCount, d.Status.CollisionCount = ptr(int32(2)), ptr(int32(1))
			return ValidateDeploymentStatusUpdate(d, old)
		}, want: []wantErr{e("status.collisionCount", tInvalid, "cannot be decremented")}},
		{name: "ReplicaSet status counts", run: func() field.ErrorList {
			old, rs := validReplicaSet(), validReplicaSet()
			rs.Status = appsv1.ReplicaSetStatus{Replicas: 1, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: -1}
			return ValidateReplicaSetStatusUpdate(rs, old)
		}, want: []wantErr{
			e("status.fullyLabeledReplicas", tInvalid, "cannot be greater than status.replicas"),
			e("status.readyReplicas", tInvalid, "cannot be greater than status.replicas"),
			e("status.availableReplicas", tInvalid, "must be greater than or equal to 0"),
		}},
		{name: "ReplicaSet negative replicas", run: func() field.ErrorList {
			old, rs := validReplicaSet(), validReplicaSet()
			rs.Status.Replicas = -1
			return ValidateReplicaSetStatusUpdate(rs, old)
		}, want: []wantErr{e("status.replicas", tInvalid, "must be greater than or equal to 0")}},
		{name: "StatefulSet status counts", run: func() field.ErrorList {
			old, s := validStatefulSet(), validStatefulSet()
			s.Status = appsv1.StatefulSetStatus{Replicas: 2, ReadyReplicas: 3, CurrentReplicas: 1, UpdatedReplicas: -1, AvailableReplicas: 3}
			return ValidateStatefulSetStatusUpdate(s, old)
		}, want: []wantErr{
			e("status.readyReplicas", tInvalid, "cannot be greater than status.replicas"),
			e("status.availableReplicas", tInvalid, "cannot be greater than status.replicas"),
			e("status.updatedReplicas", tInvalid, "must be greater than or equal to 0"),
		}},
		{name: "StatefulSet available above ready", run: func() field.ErrorList {
			old, s := validStatefulSet(), validStatefulSet()
			s.Status = appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 1, AvailableReplicas: 2}
			return ValidateStatefulSetStatusUpdate(s, old)
		}, want: []wantErr{e("status.availableReplicas", tInvalid, "cannot be greater than status.readyReplicas")}},
		{name: "DaemonSet status counts", run: func() field.ErrorList {
			old, ds := validDaemonSet(), validDaemonSet()
			ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, NumberReady: -1, NumberMisscheduled: -2}
			return ValidateDaemonSetStatusUpdate(ds, old)
		}, want: []wantErr{
			e("status.numberReady", tInvalid, "must be greater than or equal to 0"),
			e("status.numberMisscheduled", tInvalid, "must be greater than or equal to 0"),
		}},
		{name: "DaemonSet collisionCount cleared", run: func() field.ErrorList {
			old, ds := validDaemonSet(), validDaemonSet()
			old.Status.CollisionCount = ptr(int32(1))
			return ValidateDaemonSetStatusUpdate(ds, old)
		}, want: []wantErr{e("status.collisionCount", tInvalid, "cannot be decremented")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkErrs(t, tc.run(), tc.want...) })
	}
}

func validRevision() *appsv1.ControllerRevision {
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7b9f5c6d4", Namespace: "ns", ResourceVersion: "1"},
		Data:       runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"metadata":{"labels":{"app":"web"}}}}}`)},
		Revision:   1,
	}
}

func TestValidateControllerRevision(t *testing.T) {
	cases := []struct {
		name string
		run  func() field.ErrorList
		want []wantErr
	}{
		{name: "valid", run: func() field.ErrorList { return ValidateControllerRevision(validRevision()) }},
		{name: "data required", run: func() field.ErrorList {
			cr := validRevision()
			cr.Data = runtime.RawExtension{}
			return ValidateControllerRevision(cr)
		}, want: []wantErr{e("data", tRequired, "data is mandatory")}},
		{name: "negative revision", run: func() field.ErrorList {
			cr := validRevision()
			cr.Revision = -1
			return ValidateControllerRevision(cr)
		}, want: []wantErr{e("revision", tInvalid, "must be greater than or equal to 0")}},
		{name: "revision renumbered on update", run: func() field.ErrorList {
			old, cr := validRevision(), validRevision()
			cr.Revision = 4
			return ValidateControllerRevisionUpdate(cr, old)
		}},
		{name: "same data with other whitespace", run: func() field.ErrorList {
			old, cr := validRevision(), validRevision()
			cr.Data.Raw = []byte(`{"spec": {"template": {"metadata": {"labels": {"app": "web"}}}}}`)
			return ValidateControllerRevisionUpdate(cr, old)
		}},
		{name: "same data with keys reordered", run: func() field.ErrorList {
			old, cr := validRevision(), validRevision()
			old.Data.Raw = []byte(`{"a":1,"b":{"c":[1,2]}}`)
			cr.Data.Raw = []byte(`{"b":{"c":[1,2]},"a":1}`)
			return ValidateControllerRevisionUpdate(cr, old)
		}},
		{name: "data changed", run: func() field.ErrorList {
			old, cr := validRevision(), validRevision()
			cr.Data.Raw = []byte(`{"spec":{"template":{"metadata":{"labels":{"app":"api"}}}}}`)
			return ValidateControllerRevisionUpdate(cr, old)
		}, want: []wantErr{e("data", tInvalid, "field is immutable")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkErrs(t, tc.run(), tc.want...) })
	}
}

func TestValidateScale(t *testing.T) {
	cases := []struct {
		name     string
		replicas int32
		want     []wantErr
	}{
		{name: "zero", replicas: 0},
		{name: "five", replicas: 5},
		{name: "negative", replicas: -1, want: []wantErr{e("spec.replicas", tInvalid, "must be greater than or equal to 0")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scale := &autoscalingv1.Scale{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
				Spec:       autoscalingv1.ScaleSpec{Replicas: tc.replicas},
			}
			checkErrs(t, ValidateScale(scale), tc.want...)
		})
	}
}
