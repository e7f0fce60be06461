package agent

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

type metav1ListOptions = metav1.ListOptions

var everything = labels.Everything()
