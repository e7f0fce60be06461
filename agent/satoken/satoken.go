// Package satoken projects ServiceAccount tokens into a node's pods, as
// kubelet fills a projected serviceAccountToken volume: for each such
// volume of a pod it asks the TokenRequest API for a token bound to the
// pod, and writes it, the cluster CA (ca.crt) and the pod's namespace
// into a directory of the volume's own, which the agent bind-mounts where
// the pod's containers mount the volume (upstream's
// /var/run/secrets/kubernetes.io/serviceaccount), so that client-go's
// rest.InClusterConfig works unchanged.
//
// Tokens are written through a temporary file and a rename, so a reader
// never sees half a token, and refreshed once 80% of their lifetime has
// passed, as kubelet does. The package owns only the files under the
// directories it is given; it never logs a token.
package satoken

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/pki"
)

// defaultExpiration is the lifetime asked for when the volume names none
// (the API server's default).
const defaultExpiration = int64(3600)

// Volume is a projected volume of a pod that holds a ServiceAccount token.
type Volume struct {
	Name string
	// Audience of the token; empty asks for the API's.
	Audience string
	// ExpirationSeconds is the lifetime asked for.
	ExpirationSeconds int64
	// Files are the paths inside the volume: the token's, and those of the
	// CA certificate and the namespace when the volume projects them.
	TokenPath, CAPath, NamespacePath string
}

// Volumes are the token volumes of pod.
func Volumes(pod *corev1.Pod) []Volume {
	var out []Volume
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		vol := Volume{Name: v.Name}
		for _, src := range v.Projected.Sources {
			switch {
			case src.ServiceAccountToken != nil:
				vol.TokenPath, vol.Audience = src.ServiceAccountToken.Path, src.ServiceAccountToken.Audience
				vol.ExpirationSeconds = defaultExpiration
				if e := src.ServiceAccountToken.ExpirationSeconds; e != nil {
					vol.ExpirationSeconds = *e
				}
			case src.ConfigMap != nil && src.ConfigMap.Name == "kube-root-ca.crt":
				// The agent's own copy of the CA stands in for the
				// ConfigMap: it is the one the API's certificate chains to.
				vol.CAPath = itemPath(src.ConfigMap.Items, "ca.crt")
			case src.DownwardAPI != nil:
				for _, item := range src.DownwardAPI.Items {
					if item.FieldRef != nil && item.FieldRef.FieldPath == "metadata.namespace" {
						vol.NamespacePath = item.Path
					}
				}
			}
		}
		if vol.TokenPath != "" {
			out = append(out, vol)
		}
	}
	return out
}

func itemPath(items []corev1.KeyToPath, key string) string {
	if len(items) == 0 {
		return key
	}
	for _, it := range items {
		if it.Key == key {
			return it.Path
		}
	}
	return ""
}

// MountPoint is one bind mount of a token directory into a container.
type MountPoint struct {
	Source, Target string
}

// Mounts are the bind mounts container c of pod needs: each token volume
// it mounts, from dir(volume name) to the mount path.
func Mounts(pod *corev1.Pod, c *corev1.Container, dir func(volume string) string) []MountPoint {
	tokens := map[string]bool{}
	for _, v := range Volumes(pod) {
		tokens[v.Name] = true
	}
	var out []MountPoint
	for _, m := range c.VolumeMounts {
		if tokens[m.Name] && m.SubPath == "" {
			out = append(out, MountPoint{Source: dir(m.Name), Target: m.MountPath})
		}
	}
	return out
}

// Projector writes and refreshes the token volumes of pods.
type Projector struct {
	Client kubernetes.Interface
	// CA is the PEM of the cluster CA, written as ca.crt.
	CA []byte
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Issued remembers, per volume, when its token must be refreshed.
type Issued map[string]time.Time

// Sync makes sure each token volume of pod has a current token under
// dir(volume name), refreshing those past 80% of their life, and returns
// how long until the next refresh is due. issued carries the refresh
// times from one call to the next; a volume missing from it is written
// at once.
func (p *Projector) Sync(ctx context.Context, pod *corev1.Pod, dir func(volume string) string, issued Issued) (time.Duration, error) {
	now := p.now()
	var next time.Duration
	for _, v := range Volumes(pod) {
		due, ok := issued[v.Name]
		if !ok || !now.Before(due) {
			var err error
			if due, err = p.write(ctx, pod, v, dir(v.Name)); err != nil {
				return 0, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			issued[v.Name] = due
		}
		if d := due.Sub(now); next == 0 || d < next {
			next = d
		}
	}
	return next, nil
}

func (p *Projector) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// write requests a token for v and writes the volume's files, returning
// when the token should be refreshed.
func (p *Projector) write(ctx context.Context, pod *corev1.Pod, v Volume, dir string) (time.Time, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &v.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if v.Audience != "" {
		req.Spec.Audiences = []string{v.Audience}
	}
	now := p.now()
	resp, err := p.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, req, metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("request token for service account %s/%s: %w", pod.Namespace, pod.Spec.ServiceAccountName, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return time.Time{}, err
	}
	files := map[string][]byte{v.TokenPath: []byte(resp.Status.Token)}
	if v.CAPath != "" {
		files[v.CAPath] = p.CA
	}
	if v.NamespacePath != "" {
		files[v.NamespacePath] = []byte(pod.Namespace)
	}
	for name, data := range files {
		if err := writeFile(dir, name, data); err != nil {
			return time.Time{}, err
		}
	}
	return refreshAt(now, resp.Status.ExpirationTimestamp.Time), nil
}

// refreshAt is 80% into the token's life, as kubelet's token manager.
func refreshAt(issued, expires time.Time) time.Time {
	if !expires.After(issued) {
		return issued
	}
	return issued.Add(expires.Sub(issued) * 8 / 10)
}

// writeFile replaces dir/name through a rename, so that a container
// reading it sees the old content or the new, never a mix. name must stay
// inside dir.
func writeFile(dir, name string, data []byte) error {
	path := filepath.Join(dir, filepath.Clean("/"+name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return pki.WriteFileAtomic(path, data, 0o644)
}
