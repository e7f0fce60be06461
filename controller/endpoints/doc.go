// Package endpoints is the legacy Endpoints controller: for every Service
// with a selector it keeps an Endpoints object of the same name listing the
// selected pods, the way kube-controller-manager's endpoint controller does.
//
// It owns only Endpoints that belong to Services with a selector, and
// deletes an Endpoints whose Service is gone only when this controller
// wrote it. It never touches Endpoints of selector-less Services (users and
// other components write those) nor default/kubernetes, which the API
// server maintains.
//
// The package has a pure core, [Subsets], [Repack], [Truncate], [Desired]
// and [NeedsUpdate], which turns a Service and its pods into the Endpoints
// to write, and a [Controller] at the edge that feeds it from informers
// and writes the result through the API.
package endpoints
