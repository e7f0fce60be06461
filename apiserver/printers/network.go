package printers

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// maxListed is how many addresses, ports or hosts a cell shows before
// summarizing the rest as " + N more...".
const maxListed = 3

var servicePrinter = printer[*corev1.Service]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Type", "string", corev1.ServiceSpec{}.SwaggerDoc()["type"]),
		column("Cluster-IP", "string", corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]),
		column("External-IP", "string", corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]),
		column("Port(s)", "string", corev1.ServiceSpec{}.SwaggerDoc()["ports"]),
		ageColumn,
		wideColumn("Selector", "string", corev1.ServiceSpec{}.SwaggerDoc()["selector"]),
	},
	cells: serviceCells,
}

func serviceCells(svc *corev1.Service) []any {
	clusterIP := "<none>"
	if len(svc.Spec.ClusterIPs) > 0 {
		clusterIP = svc.Spec.ClusterIPs[0]
	}
	return []any{
		svc.Name,
		string(svc.Spec.Type),
		clusterIP,
		serviceExternalIP(svc),
		noneIfEmpty(servicePorts(svc.Spec.Ports)),
		age(svc.CreationTimestamp),
		labels.FormatLabels(svc.Spec.Selector),
	}
}

// serviceExternalIP renders where the service is reachable from outside:
// its external IPs, its load balancer's addresses ("<pending>" until one is
// assigned), or the DNS name of an ExternalName service.
func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		return noneIfEmpty(strings.Join(svc.Spec.ExternalIPs, ","))
	case corev1.ServiceTypeLoadBalancer:
		var lb []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			lb = appendIPOrHostname(lb, in.IP, in.Hostname)
		}
		all := append(sortedUnique(lb), svc.Spec.ExternalIPs...)
		if len(all) == 0 {
			return "<pending>"
		}
		return strings.Join(all, ",")
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// servicePorts renders ports as "80/TCP", or "80:30080/TCP" with a node port.
func servicePorts(ports []corev1.ServicePort) string {
	pieces := make([]string, len(ports))
	for i, p := range ports {
		pieces[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if p.NodePort > 0 {
			pieces[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		}
	}
	return strings.Join(pieces, ",")
}

var endpointsPrinter = printer[*corev1.Endpoints]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Endpoints", "string", corev1.Endpoints{}.SwaggerDoc()["subsets"]),
		ageColumn,
	},
	cells: func(ep *corev1.Endpoints) []any {
		return []any{ep.Name, endpointsAddresses(ep), age(ep.CreationTimestamp)}
	},
}

// endpointsAddresses renders ready addresses as "ip:port" for every port of
// their subset (bare "ip" for headless services without ports).
func endpointsAddresses(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	var l shortList
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			for _, a := range ss.Addresses {
				l.add(a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				l.add(net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	return l.String()
}

var endpointSlicePrinter = printer[*discoveryv1.EndpointSlice]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("AddressType", "string", discoveryv1.EndpointSlice{}.SwaggerDoc()["addressType"]),
		column("Ports", "string", discoveryv1.EndpointSlice{}.SwaggerDoc()["ports"]),
		column("Endpoints", "string", discoveryv1.EndpointSlice{}.SwaggerDoc()["endpoints"]),
		ageColumn,
	},
	cells: endpointSliceCells,
}

func endpointSliceCells(slice *discoveryv1.EndpointSlice) []any {
	var ports, addrs shortList
	for _, p := range slice.Ports {
		switch {
		case p.Port != nil:
			ports.add(strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			ports.add(*p.Name)
		default:
			ports.add("*")
		}
	}
	for _, e := range slice.Endpoints {
		for _, a := range e.Addresses {
			addrs.add(a)
		}
	}
	return []any{
		slice.Name,
		string(slice.AddressType),
		unsetIfEmpty(ports.String()),
		unsetIfEmpty(addrs.String()),
		age(slice.CreationTimestamp),
	}
}

var ingressPrinter = printer[*networkingv1.Ingress]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Class", "string", "The name of the IngressClass resource that should be used for additional configuration"),
		column("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
		column("Address", "string", "Address is a list containing ingress points for the load-balancer"),
		column("Ports", "string", "Ports of TLS configurations that open"),
		ageColumn,
	},
	cells: ingressCells,
}

func ingressCells(ing *networkingv1.Ingress) []any {
	class := "<none>"
	if ing.Spec.IngressClassName != nil {
		class = *ing.Spec.IngressClassName
	}
	var addrs []string
	for _, in := range ing.Status.LoadBalancer.Ingress {
		addrs = appendIPOrHostname(addrs, in.IP, in.Hostname)
	}
	// Ingress controllers conventionally serve plain HTTP, and HTTPS too
	// once TLS is configured; the API does not record ports.
	ports := "80"
	if len(ing.Spec.TLS) > 0 {
		ports = "80, 443"
	}
	return []any{
		ing.Name,
		class,
		ingressHosts(ing.Spec.Rules),
		strings.Join(sortedUnique(addrs), ","),
		ports,
		age(ing.CreationTimestamp),
	}
}

// ingressHosts renders the rules' hosts, "*" if no rule names one. It keeps
// upstream's arithmetic: "+ N more" counts rules, not hosts, and appears only
// once a rule follows the third listed host.
func ingressHosts(rules []networkingv1.IngressRule) string {
	var hosts []string
	more := false
	for _, r := range rules {
		if len(hosts) == maxListed {
			more = true
			break
		}
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	if more {
		return fmt.Sprintf("%s + %d more...", strings.Join(hosts, ","), len(rules)-maxListed)
	}
	return strings.Join(hosts, ",")
}

var ingressClassPrinter = printer[*networkingv1.IngressClass]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Controller", "string", "Controller that is responsible for handling this class"),
		column("Parameters", "string", "A reference to a resource with additional parameters"),
		ageColumn,
	},
	cells: ingressClassCells,
}

// ingressClassCells renders PARAMETERS as "Kind.group/name", or "Kind/name"
// for the core group.
func ingressClassCells(class *networkingv1.IngressClass) []any {
	params := "<none>"
	if p := class.Spec.Parameters; p != nil {
		params = p.Kind
		if p.APIGroup != nil {
			params += "." + *p.APIGroup
		}
		params += "/" + p.Name
	}
	return []any{class.Name, class.Spec.Controller, params, age(class.CreationTimestamp)}
}

// shortList keeps the first maxListed items and counts the rest.
type shortList struct {
	items []string
	total int
}

func (l *shortList) add(s string) {
	if len(l.items) < maxListed {
		l.items = append(l.items, s)
	}
	l.total++
}

// String renders "a,b,c" or "a,b,c + 2 more...".
func (l *shortList) String() string {
	s := strings.Join(l.items, ",")
	if l.total > maxListed {
		s += fmt.Sprintf(" + %d more...", l.total-maxListed)
	}
	return s
}

// appendIPOrHostname appends a load balancer ingress point: its IP, else its
// hostname, else nothing.
func appendIPOrHostname(to []string, ip, hostname string) []string {
	switch {
	case ip != "":
		return append(to, ip)
	case hostname != "":
		return append(to, hostname)
	}
	return to
}

// sortedUnique sorts values and drops duplicates, in place.
func sortedUnique(values []string) []string {
	slices.Sort(values)
	return slices.Compact(values)
}

// unsetIfEmpty returns s, or "<unset>" when s is empty.
func unsetIfEmpty(s string) string {
	if s == "" {
		return "<unset>"
	}
	return s
}
