package nodeipam

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

var (
	everything = labels.Everything()
	metavOpts  = metav1.PatchOptions{FieldManager: "nodeipam-controller"}
)
