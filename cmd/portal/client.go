package main

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// componentClient reads --kubeconfig for a component that runs apart from
// the API server, and returns its configuration and a clientset speaking
// protobuf (JSON where a type has no protobuf form).
func componentClient(kubeconfig, userAgent string) (*rest.Config, kubernetes.Interface, error) {
	if kubeconfig == "" {
		return nil, nil, fmt.Errorf("--kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = userAgent
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, client, nil
}
