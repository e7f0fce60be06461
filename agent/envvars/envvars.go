// Package envvars computes a container's environment the way kubelet does:
// the service links of the Services visible to the pod, envFrom, env with
// $(VAR) expansion, and the valueFrom sources. It is pure: the Services,
// ConfigMaps and Secrets come in through a Sources value, and nothing here
// talks to the API or starts a process.
package envvars

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// masterNamespace and masterServices are the Services every pod gets
// variables for, whatever its enableServiceLinks says.
const masterNamespace = "default"

var masterServices = map[string]bool{"kubernetes": true}

// Var is one environment variable.
type Var struct {
	Name, Value string
}

// FromServices returns the service link variables of services, in the order
// given: {NAME}_SERVICE_HOST, {NAME}_SERVICE_PORT, one
// {NAME}_SERVICE_PORT_{PORTNAME} per named port, and the Docker-link set.
// Services without a cluster IP (headless, ExternalName) give none.
func FromServices(services []*corev1.Service) []Var {
	var out []Var
	for _, svc := range services {
		if !hasClusterIP(svc) || len(svc.Spec.Ports) == 0 {
			continue
		}
		prefix := varName(svc.Name)
		out = append(out,
			Var{prefix + "_SERVICE_HOST", svc.Spec.ClusterIP},
			Var{prefix + "_SERVICE_PORT", strconv.Itoa(int(svc.Spec.Ports[0].Port))})
		for _, p := range svc.Spec.Ports {
			// Only the first port may be unnamed; it has the name above.
			if p.Name != "" {
				out = append(out, Var{prefix + "_SERVICE_PORT_" + varName(p.Name), strconv.Itoa(int(p.Port))})
			}
		}
		out = append(out, linkVars(prefix, svc)...)
	}
	return out
}

// linkVars are the variables Docker's --link set, which kubelet keeps for
// compatibility: {NAME}_PORT for the first port, then per port
// {NAME}_PORT_{port}_{PROTO} with _PROTO, _PORT and _ADDR.
func linkVars(prefix string, svc *corev1.Service) []Var {
	var out []Var
	for i, p := range svc.Spec.Ports {
		proto := string(corev1.ProtocolTCP)
		if p.Protocol != "" {
			proto = string(p.Protocol)
		}
		lower := strings.ToLower(proto)
		url := lower + "://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(p.Port)))
		if i == 0 {
			out = append(out, Var{prefix + "_PORT", url})
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		out = append(out,
			Var{pp, url},
			Var{pp + "_PROTO", lower},
			Var{pp + "_PORT", strconv.Itoa(int(p.Port))},
			Var{pp + "_ADDR", svc.Spec.ClusterIP})
	}
	return out
}

// varName is a Service or port name as a variable name: upper case, '-' as '_'.
func varName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

func hasClusterIP(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// ServiceMap returns the service variables a pod in namespace ns sees, from
// all the Services the node knows: those with a cluster IP in ns when
// enableServiceLinks is true, and always the master Services (`kubernetes`
// in default), unless a Service of the same name in ns replaces it, as
// kubelet does.
func ServiceMap(services []*corev1.Service, ns string, enableServiceLinks bool) map[string]string {
	chosen := map[string]*corev1.Service{}
	for _, svc := range services {
		if !hasClusterIP(svc) {
			continue
		}
		switch {
		case svc.Namespace == masterNamespace && masterServices[svc.Name]:
			if _, ok := chosen[svc.Name]; !ok {
				chosen[svc.Name] = svc
			}
		case svc.Namespace == ns && enableServiceLinks:
			chosen[svc.Name] = svc
		}
	}
	names := make([]string, 0, len(chosen))
	for name := range chosen {
		names = append(names, name)
	}
	sort.Strings(names)
	list := make([]*corev1.Service, 0, len(names))
	for _, name := range names {
		list = append(list, chosen[name])
	}
	m := make(map[string]string)
	for _, v := range FromServices(list) {
		m[v.Name] = v.Value
	}
	return m
}
