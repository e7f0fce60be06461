// Command inclusterclient is run in a pod by the end-to-end tests: it
// builds client-go's in-cluster config, unchanged, from the environment
// and the files the agent mounts, lists the Services of its namespace,
// and prints one line saying how that went.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func main() {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		fmt.Printf("CONFIG-ERROR %v\n", err)
		os.Exit(2)
	}
	ns, err := os.ReadFile(namespaceFile)
	if err != nil {
		fmt.Printf("CONFIG-ERROR %v\n", err)
		os.Exit(2)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Printf("CONFIG-ERROR %v\n", err)
		os.Exit(2)
	}
	// The node's proxy may still be programming the kubernetes Service:
	// retry what is not an answer of the API.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		list, err := client.CoreV1().Services(strings.TrimSpace(string(ns))).List(ctx, metav1.ListOptions{})
		cancel()
		var status apierrors.APIStatus
		switch {
		case err == nil:
			fmt.Printf("LIST-OK %d\n", len(list.Items))
			return
		case errors.As(err, &status):
			fmt.Printf("LIST-ERROR %d %s\n", status.Status().Code, status.Status().Message)
			os.Exit(1)
		case time.Now().After(deadline):
			fmt.Printf("LIST-UNREACHABLE %v\n", err)
			os.Exit(1)
		}
		time.Sleep(time.Second)
	}
}
