package serviceaccount

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func newPlugin(t *testing.T, objs ...runtime.Object) *Plugin {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	p := New()
	p.retry = 0
	p.SetExternalKubeClientSet(client)
	p.SetExternalKubeInformerFactory(factory)
	for _, o := range objs {
		if sa, ok := o.(*corev1.ServiceAccount); ok {
			factory.Core().V1().ServiceAccounts().Informer().GetStore().Add(sa)
		}
	}
	p.SetReadyFunc(func() bool { return true })
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	return p
}

func attrs(pod *corev1.Pod) admission.Attributes {
	return admission.NewAttributesRecord(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"),
		"ns", pod.Name, corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create,
		&metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "test"})
}

func sa(name string, automount *bool) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, AutomountServiceAccountToken: automount}
}

func pod(account string, automount *bool) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.PodSpec{
		ServiceAccountName: account, AutomountServiceAccountToken: automount,
		InitContainers: []corev1.Container{{Name: "init"}},
		Containers:     []corev1.Container{{Name: "app"}, {Name: "side"}},
	}}
}

func TestAdmit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		accounts    []runtime.Object
		pod         *corev1.Pod
		wantAccount string
		wantMount   bool
		wantErr     string
	}{
		{name: "no account named gets default", accounts: []runtime.Object{sa("default", nil)}, pod: pod("", nil),
			wantAccount: "default", wantMount: true},
		{name: "named account", accounts: []runtime.Object{sa("builder", nil)}, pod: pod("builder", nil),
			wantAccount: "builder", wantMount: true},
		{name: "pod opts out", accounts: []runtime.Object{sa("default", nil)}, pod: pod("", ptr.To(false)),
			wantAccount: "default"},
		{name: "account opts out", accounts: []runtime.Object{sa("default", ptr.To(false))}, pod: pod("", nil),
			wantAccount: "default"},
		{name: "pod overrides the account's opt out", accounts: []runtime.Object{sa("default", ptr.To(false))}, pod: pod("", ptr.To(true)),
			wantAccount: "default", wantMount: true},
		{name: "missing account", pod: pod("ghost", nil),
			wantErr: `pods "web" is forbidden: error looking up service account ns/ghost: serviceaccount "ghost" not found`},
		{name: "missing default account", pod: pod("", nil),
			wantErr: `pods "web" is forbidden: error looking up service account ns/default: serviceaccount "default" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlugin(t, tc.accounts...)
			err := p.Admit(context.Background(), attrs(tc.pod), nil)
			if err == nil {
				err = p.Validate(context.Background(), attrs(tc.pod), nil)
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.pod.Spec.ServiceAccountName; got != tc.wantAccount {
				t.Errorf("serviceAccountName: got %q, want %q", got, tc.wantAccount)
			}
			checkMounted(t, tc.pod, tc.wantMount)
		})
	}
}

func checkMounted(t *testing.T, pod *corev1.Pod, want bool) {
	t.Helper()
	if !want {
		if len(pod.Spec.Volumes) != 0 {
			t.Errorf("volumes: got %v, want none", pod.Spec.Volumes)
		}
		return
	}
	if len(pod.Spec.Volumes) != 1 {
		t.Fatalf("volumes: got %d, want 1", len(pod.Spec.Volumes))
	}
	v := pod.Spec.Volumes[0]
	if !strings.HasPrefix(v.Name, VolumePrefix) || len(v.Name) != len(VolumePrefix)+5 {
		t.Errorf("volume name: got %q, want %sXXXXX", v.Name, VolumePrefix)
	}
	if diff := cmp.Diff(TokenVolume(v.Name), v); diff != "" {
		t.Errorf("volume (-want +got):\n%s", diff)
	}
	want2 := []corev1.VolumeMount{{Name: v.Name, ReadOnly: true, MountPath: DefaultAPITokenMountPath}}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if diff := cmp.Diff(want2, c.VolumeMounts); diff != "" {
			t.Errorf("container %s mounts (-want +got):\n%s", c.Name, diff)
		}
	}
}

// TestAdmitKeepsOwnMount: a container with its own volume at the token path
// keeps it; the others get the token.
func TestAdmitKeepsOwnMount(t *testing.T) {
	p := newPlugin(t, sa("default", nil))
	pd := pod("", nil)
	own := corev1.VolumeMount{Name: "mine", MountPath: DefaultAPITokenMountPath}
	pd.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{own}
	if err := p.Admit(context.Background(), attrs(pd), nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]corev1.VolumeMount{own}, pd.Spec.Containers[1].VolumeMounts); diff != "" {
		t.Errorf("own mount changed (-want +got):\n%s", diff)
	}
	if len(pd.Spec.Containers[0].VolumeMounts) != 1 || len(pd.Spec.Volumes) != 1 {
		t.Errorf("other container: got mounts %v, volumes %v; want the token", pd.Spec.Containers[0].VolumeMounts, pd.Spec.Volumes)
	}
}

// TestAdmitLiveLookup: an account the cache has not seen yet is found
// through the API.
func TestAdmitLiveLookup(t *testing.T) {
	client := fake.NewClientset(sa("late", nil))
	p := New()
	p.retry = 0
	p.SetExternalKubeClientSet(client)
	p.SetExternalKubeInformerFactory(informers.NewSharedInformerFactory(fake.NewClientset(), 0))
	p.SetReadyFunc(func() bool { return true })
	pd := pod("late", nil)
	if err := p.Admit(context.Background(), attrs(pd), nil); err != nil {
		t.Fatalf("got %v, want the account found through the API", err)
	}
}

// TestAdmitImagePullSecrets: the account's pull secrets go to a pod with
// none of its own.
func TestAdmitImagePullSecrets(t *testing.T) {
	account := sa("default", nil)
	account.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
	p := newPlugin(t, account)
	pd := pod("", nil)
	if err := p.Admit(context.Background(), attrs(pd), nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(account.ImagePullSecrets, pd.Spec.ImagePullSecrets); diff != "" {
		t.Errorf("imagePullSecrets (-want +got):\n%s", diff)
	}
}
