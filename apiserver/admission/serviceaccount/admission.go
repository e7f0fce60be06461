// Package serviceaccount is the API server's ServiceAccount admission
// plugin, as upstream's of the same name. On a new pod it:
//
//   - sets spec.serviceAccountName to "default" when the pod names none;
//   - refuses the pod when that ServiceAccount does not exist;
//   - copies the account's imagePullSecrets when the pod has none;
//   - unless automountServiceAccountToken is false on the pod (or, when
//     the pod does not say, on the account), adds upstream's projected
//     volume kube-api-access-XXXXX (a token, the cluster CA from the
//     kube-root-ca.crt ConfigMap, the namespace) and mounts it read-only
//     at /var/run/secrets/kubernetes.io/serviceaccount in every container
//     that has nothing mounted there yet.
//
// The node agent fills that mount (see agent/satoken); the volume is in the
// spec so that the pod reads as it would on a kubelet.
//
// ServiceAccounts are read from the API server's shared informers. One the
// cache lacks is looked up through the API, and "default", which the
// serviceaccounts controller creates as a namespace appears, for up to a
// second, as upstream does.
package serviceaccount

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Upstream's names.
const (
	// PluginName is the plugin's name.
	PluginName = "ServiceAccount"
	// DefaultServiceAccountName is the account of a pod that names none.
	DefaultServiceAccountName = "default"
	// DefaultAPITokenMountPath is where containers find the token, the CA
	// and the namespace, and where client-go's in-cluster config looks.
	DefaultAPITokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// VolumePrefix begins the name of the token volume.
	VolumePrefix = "kube-api-access-"
	// RootCAConfigMap is the ConfigMap the volume takes ca.crt from.
	RootCAConfigMap = "kube-root-ca.crt"
	// MirrorPodAnnotation marks a pod a node agent mirrors from a file.
	MirrorPodAnnotation = "kubernetes.io/config.mirror"
	// tokenExpirationSeconds is the lifetime the volume asks for:
	// upstream's hour and seven seconds, which tells its token issuer the
	// request came from this volume.
	tokenExpirationSeconds = 3607
)

// Plugin defaults and checks the ServiceAccount of new pods. Make one
// with New; it needs the informer factory and client before use.
type Plugin struct {
	*admission.Handler
	accounts corelisters.ServiceAccountLister
	client   kubernetes.Interface
	// retry is the wait between lookups of the default account.
	retry time.Duration
}

var (
	_ admission.MutationInterface   = (*Plugin)(nil)
	_ admission.ValidationInterface = (*Plugin)(nil)
)

// New returns a plugin that handles pod creates.
func New() *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create), retry: 100 * time.Millisecond}
}

// SetExternalKubeInformerFactory makes the plugin read ServiceAccounts
// through f.
func (p *Plugin) SetExternalKubeInformerFactory(f informers.SharedInformerFactory) {
	inf := f.Core().V1().ServiceAccounts()
	p.accounts = inf.Lister()
	p.SetReadyFunc(inf.Informer().HasSynced)
}

// SetExternalKubeClientSet gives the plugin the client it looks accounts
// up with when the cache lacks them.
func (p *Plugin) SetExternalKubeClientSet(c kubernetes.Interface) { p.client = c }

// ValidateInitialization fails when the plugin lacks its lister or client.
func (p *Plugin) ValidateInitialization() error {
	if p.accounts == nil || p.client == nil {
		return fmt.Errorf("%s: no ServiceAccount lister or client", PluginName)
	}
	return nil
}

// Admit defaults the account of a new pod and mounts its token.
func (p *Plugin) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, err := podOf(a)
	if pod == nil || err != nil {
		return err
	}
	if _, mirror := pod.Annotations[MirrorPodAnnotation]; mirror {
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = DefaultServiceAccountName
	}
	// v1 shows the account under its deprecated name too, as upstream's
	// conversion fills it in.
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName
	sa, err := p.lookup(ctx, a)
	if err != nil {
		return err
	}
	if automount(pod, sa) {
		mountToken(pod)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 && len(sa.ImagePullSecrets) > 0 {
		pod.Spec.ImagePullSecrets = append([]corev1.LocalObjectReference(nil), sa.ImagePullSecrets...)
	}
	return nil
}

// Validate refuses a new pod whose ServiceAccount does not exist, and a
// mirror pod that names one (a static pod cannot get a token).
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, err := podOf(a)
	if pod == nil || err != nil {
		return err
	}
	if _, mirror := pod.Annotations[MirrorPodAnnotation]; mirror {
		if pod.Spec.ServiceAccountName != "" {
			return admission.NewForbidden(a, fmt.Errorf("a mirror pod may not reference service accounts"))
		}
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		return admission.NewForbidden(a, fmt.Errorf("no service account specified for pod %s/%s", a.GetNamespace(), pod.Name))
	}
	_, err = p.lookup(ctx, a)
	return err
}

// podOf is the pod a request creates, nil for every other request.
func podOf(a admission.Attributes) (*corev1.Pod, error) {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" {
		return nil, nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s: got %T, want a Pod", PluginName, a.GetObject()))
	}
	return pod, nil
}

// lookup finds the pod's ServiceAccount, or says why the pod is refused.
func (p *Plugin) lookup(ctx context.Context, a admission.Attributes) (*corev1.ServiceAccount, error) {
	ns, name := a.GetNamespace(), a.GetObject().(*corev1.Pod).Spec.ServiceAccountName
	sa, err := p.get(ctx, ns, name)
	if err != nil {
		return nil, admission.NewForbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", ns, name, err))
	}
	return sa, nil
}

func (p *Plugin) get(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	if p.WaitForReady() {
		sa, err := p.accounts.ServiceAccounts(ns).Get(name)
		if !apierrors.IsNotFound(err) {
			return sa, err
		}
	}
	attempts := 1
	if name == DefaultServiceAccountName {
		// The controller creates it as the namespace appears; a pod
		// created right after its namespace may come first.
		attempts = 10
	}
	var err error
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(p.retry):
			}
		}
		var sa *corev1.ServiceAccount
		sa, err = p.client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return sa, err
		}
	}
	// The API's NotFound names the resource in the plural; upstream's
	// message says serviceaccount "NAME" not found.
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccount"), name)
}

// automount reports whether the pod gets a token: the pod's setting wins,
// then the account's, and the default is yes.
func automount(pod *corev1.Pod, sa *corev1.ServiceAccount) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// mountToken adds the token volume (unless the pod has one already) and
// mounts it in every container with nothing at the token path.
func mountToken(pod *corev1.Pod) {
	volume := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, VolumePrefix) {
			volume = v.Name
			break
		}
	}
	hasVolume := volume != ""
	if !hasVolume {
		volume = names.SimpleNameGenerator.GenerateName(VolumePrefix)
	}
	mount := corev1.VolumeMount{Name: volume, ReadOnly: true, MountPath: DefaultAPITokenMountPath}
	needed := false
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if !mountsTokenPath(cs[i]) {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	if needed && !hasVolume {
		pod.Spec.Volumes = append(pod.Spec.Volumes, TokenVolume(volume))
	}
}

func mountsTokenPath(c corev1.Container) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == DefaultAPITokenMountPath {
			return true
		}
	}
	return false
}

// TokenVolume is upstream's projected token volume of the given name.
func TokenVolume(name string) corev1.Volume {
	mode := int32(0o644)
	exp := int64(tokenExpirationSeconds)
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &exp, Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: RootCAConfigMap},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}}}
}
