// Package openapi owns the OpenAPI definitions that Portal's generic API
// server serves for the built-in Kubernetes types (k8s.io/api and
// k8s.io/apimachinery) it exposes.
//
// The definitions back /openapi/v2 and /openapi/v3 (kubectl explain, kubectl
// apply validation) and are also used by the generic server to build the
// server-side-apply type converter, so every type reachable from a served
// resource must have a definition here.
//
// zz_generated.openapi.go is produced by k8s.io/kube-openapi's openapi-gen at
// the version pinned in go.mod; do not edit it by hand. Regenerate with
// hack/update-openapi.sh (which runs `go generate ./apiserver/openapi/`) and
// check it with hack/verify-openapi.sh.
//
// The definition map is keyed by OpenAPI model name (for example
// "io.k8s.api.core.v1.Pod", i.e. corev1.Pod{}.OpenAPIModelName()), which is the
// naming k8s.io/apiserver's DefinitionNamer and kube-openapi's builders use.
//
// API rule violations found by openapi-gen's linter are written to
// violations.report in this directory; they are informational only (they
// belong to the upstream types) and never fail generation.
package openapi

//go:generate go run k8s.io/kube-openapi/cmd/openapi-gen@v0.0.0-20260721132016-d427ff9ee9ad --output-dir . --output-pkg portal.dev/portal/apiserver/openapi --output-file zz_generated.openapi.go --report-filename violations.report k8s.io/api/core/v1 k8s.io/api/apps/v1 k8s.io/api/discovery/v1 k8s.io/api/coordination/v1 k8s.io/api/networking/v1 k8s.io/api/authentication/v1 k8s.io/api/policy/v1 k8s.io/api/autoscaling/v1 k8s.io/api/rbac/v1 k8s.io/api/authorization/v1 k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/version k8s.io/apimachinery/pkg/util/intstr k8s.io/apimachinery/pkg/api/resource k8s.io/metrics/pkg/apis/metrics/v1beta1
