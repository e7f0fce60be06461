// Command dns fills a Portal (or any Kubernetes) API with the Services the
// DNS benchmark queries: ClusterIP Services s0..sN-1 in namespace default
// (the names of the anchors' query files), or, for the scale run, headless
// Services h0..hN-1 in namespace scale with M endpoints each in
// hand-written EndpointSlices. It creates them from many goroutines and
// prints how long that took. See run.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

var (
	kubeconfig  = flag.String("kubeconfig", "", "kubeconfig of the API server")
	services    = flag.Int("services", 1000, "Services to create")
	endpoints   = flag.Int("endpoints-per-service", 0, "0: ClusterIP Services s0.. in default; >0: headless Services h0.. in namespace scale with this many endpoints each")
	concurrency = flag.Int("concurrency", 32, "parallel creates")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-dns:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.QPS, cfg.Burst = 5000, 5000
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	ns := "default"
	if *endpoints > 0 {
		ns = "scale"
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range *concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= *services || failed.Load() != nil {
					return
				}
				if err := create(ctx, c, ns, i); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	fmt.Printf("created %d services (%d endpoints each) in %s in %.1fs\n", *services, *endpoints, ns, time.Since(start).Seconds())
	return nil
}

func create(ctx context.Context, c kubernetes.Interface, ns string, i int) error {
	if *endpoints == 0 {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
		_, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		return err
	}
	name := fmt.Sprintf("h%d", i)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for j := range *endpoints {
		n := i**endpoints + j
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 100+n>>16, (n>>8)&255, n&255)},
			Hostname:   ptr.To(fmt.Sprintf("pod-%d", j)),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-pod-%d", name, j)},
			NodeName:   ptr.To("node-1"),
		})
	}
	_, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = nil
	}
	return err
}
